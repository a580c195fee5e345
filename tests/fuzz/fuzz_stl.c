/*
 * fuzz_stl.c: fuzz target for the STL reader, ASCII and binary
 * (server/core/ts_mesh_stl.c),
 * then validation, repair, the OBJ writer and the import pipeline on
 * whatever it accepts; the invariants are in fuzz_mesh.h. Seeds:
 * tests/fuzz/corpus/stl/.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_mesh.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return fuzz_mesh(data, size, TS_MESH_STL);
}
