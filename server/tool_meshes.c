/*
 * tool_meshes.c: loading the daemon's rigid tool meshes (see tool_meshes.h).
 */
#include "tool_meshes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_error.h"
#include "core/ts_mesh_io.h"

static int load_one(ts_tool_meshes *tm, const char *entry, uint32_t max_tris, char *err,
                    size_t errcap) {
  const char *eq = strchr(entry, '=');
  if (!eq || eq == entry) {
    snprintf(err, errcap, "tool-mesh entry '%s': expected NAME=FILE[@SCALE]", entry);
    return TS_EINVAL;
  }
  size_t nlen = (size_t)(eq - entry);
  if (nlen >= TS_TOOL_MESH_NAME) {
    snprintf(err, errcap, "tool-mesh entry '%s': the name is over %d characters", entry,
             TS_TOOL_MESH_NAME - 1);
    return TS_EINVAL;
  }
  char name[TS_TOOL_MESH_NAME];
  memcpy(name, entry, nlen);
  name[nlen] = 0;
  for (size_t i = 0; i < nlen; i++) {
    char ch = name[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '-' || ch == '_' || ch == '.')) {
      snprintf(err, errcap, "tool-mesh name '%s': use letters, digits, '-', '_' and '.'", name);
      return TS_EINVAL;
    }
  }
  if (ts_tool_meshes_find(tm, name)) {
    snprintf(err, errcap, "tool-mesh name '%s' is given twice", name);
    return TS_EINVAL;
  }
  if (tm->n == TS_TOOL_MESHES_MAX) {
    snprintf(err, errcap, "more than %d tool meshes", TS_TOOL_MESHES_MAX);
    return TS_EFULL;
  }
  char path[1024];
  snprintf(path, sizeof path, "%s", eq + 1);
  double scale = 1;
  char *at = strrchr(path, '@');
  if (at) {
    char *end;
    *at = 0;
    scale = strtod(at + 1, &end);
    if (end == at + 1 || *end || !isfinite(scale) || !(scale > 0) || scale > 1e3) {
      snprintf(err, errcap, "tool mesh '%s': scale '%s' must be a number in (0, 1000]", name,
               at + 1);
      return TS_EINVAL;
    }
  }
  if (!path[0]) {
    snprintf(err, errcap, "tool mesh '%s': no file", name);
    return TS_EINVAL;
  }
  ts_mesh_import_opts o = ts_mesh_import_opts_default();
  o.scale = scale;
  o.max_tris = max_tris;
  o.max_bytes = 64u << 20;
  ts_mesh *m = NULL;
  char msg[300];
  int rc = ts_mesh_import_file(path, TS_MESH_AUTO, &o, &m, NULL, NULL, msg, sizeof msg);
  if (rc) {
    snprintf(err, errcap, "tool mesh '%s': %s", name, msg);
    return rc;
  }
  /* the importer has applied the scale: the tree takes the mesh in metres */
  ts_tool_shape_def d = ts_default_tool_shape_def();
  d.kind = TS_SHAPE_MESH;
  d.mesh = m;
  d.mesh_scale = 1;
  ts_obb_tree *tree = NULL;
  rc = ts_obb_tree_create(&d, &tree);
  uint32_t nt = m->n_tris;
  ts_mesh_free(m);
  if (rc) {
    snprintf(err, errcap, "tool mesh '%s' (%s): cannot build its OBB tree: %s", name, path,
             ts_strerror(rc));
    return rc;
  }
  snprintf(tm->name[tm->n], sizeof tm->name[tm->n], "%s", name);
  tm->tree[tm->n] = tree;
  tm->n_tris[tm->n] = nt;
  tm->n++;
  return 0;
}

int ts_tool_meshes_load(ts_tool_meshes *tm, const char *setting, uint32_t max_tris, char *err,
                        size_t errcap) {
  memset(tm, 0, sizeof *tm);
  if (!setting) return 0;
  const char *p = setting;
  while (*p) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    char entry[1100];
    if (len >= sizeof entry) {
      snprintf(err, errcap, "tool-mesh entry too long");
      ts_tool_meshes_free(tm);
      return TS_EINVAL;
    }
    memcpy(entry, p, len);
    entry[len] = 0;
    if (len) {
      int rc = load_one(tm, entry, max_tris, err, errcap);
      if (rc) {
        ts_tool_meshes_free(tm);
        return rc;
      }
    }
    p += len;
    if (*p == ',') p++;
  }
  return 0;
}

void ts_tool_meshes_free(ts_tool_meshes *tm) {
  for (uint32_t i = 0; i < tm->n; i++) ts_obb_tree_destroy(tm->tree[i]);
  memset(tm, 0, sizeof *tm);
}

const ts_obb_tree *ts_tool_meshes_find(const ts_tool_meshes *tm, const char *name) {
  for (uint32_t i = 0; i < tm->n; i++)
    if (strcmp(tm->name[i], name) == 0) return tm->tree[i];
  return NULL;
}

void ts_tool_meshes_names(const ts_tool_meshes *tm, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = 0;
  for (uint32_t i = 0; i < tm->n && len < cap; i++) {
    int n = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", tm->name[i]);
    if (n < 0) break;
    len += (size_t)n;
  }
  if (!tm->n) snprintf(buf, cap, "none: start the daemon with --tool-mesh NAME=FILE[@SCALE]");
}
