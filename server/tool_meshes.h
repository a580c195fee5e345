/*
 * tool_meshes.h: the rigid tool meshes a daemon offers (issue 5: "a tool is
 * a mesh or a primitive declared when the client joins"). They are named in
 * the tool-mesh setting, NAME=FILE[@SCALE] comma-separated (OBJ, STL or PLY
 * by extension, SCALE the file's units in metres, default 1), read and
 * checked at start, and each built once into an OBB tree (core/ts_obb_tree.h)
 * that is never changed afterwards: physics threads place it by the tool's
 * pose without locks, and it is freed only after they have stopped.
 */
#ifndef TS_TOOL_MESHES_H
#define TS_TOOL_MESHES_H

#include <stddef.h>
#include <stdint.h>

#include "core/ts_obb_tree.h"

#define TS_TOOL_MESHES_MAX 16
#define TS_TOOL_MESH_NAME 32

typedef struct ts_tool_meshes {
  uint32_t n;
  char name[TS_TOOL_MESHES_MAX][TS_TOOL_MESH_NAME];
  ts_obb_tree *tree[TS_TOOL_MESHES_MAX];
  uint32_t n_tris[TS_TOOL_MESHES_MAX];
} ts_tool_meshes;

/* Reads the meshes the setting names ("" = none). Returns 0, or a negative
 * ts_errno with what is wrong (the entry, the file and the reader's message)
 * in err; nothing is kept on failure. A mesh over max_tris triangles is
 * refused (TS_ETOOBIG). */
int ts_tool_meshes_load(ts_tool_meshes *tm, const char *setting, uint32_t max_tris, char *err,
                        size_t errcap);

void ts_tool_meshes_free(ts_tool_meshes *tm);

/* The tree of a name, or NULL. */
const ts_obb_tree *ts_tool_meshes_find(const ts_tool_meshes *tm, const char *name);

/* The names, comma-separated, into buf (for error messages). */
void ts_tool_meshes_names(const ts_tool_meshes *tm, char *buf, size_t cap);

#endif
