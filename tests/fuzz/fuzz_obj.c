/*
 * fuzz_obj.c: fuzz target for the Wavefront OBJ reader
 * (server/core/ts_mesh_obj.c),
 * then validation, repair, the OBJ writer and the import pipeline on
 * whatever it accepts; the invariants are in fuzz_mesh.h. Seeds:
 * tests/fuzz/corpus/obj/.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_mesh.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return fuzz_mesh(data, size, TS_MESH_OBJ);
}
