/*
 * openmesh_loop.cpp: reference program for the Loop subdivision test
 * (tests/unit/test_subdivision.c). Reads a triangle mesh from an OBJ file
 * (`v x y z` and `f a b c` lines, indices 1-based or negative, `a/t/n` forms
 * accepted, polygons fanned), applies OpenMesh's uniform Loop subdivision
 * (OpenMesh::Subdivider::Uniform::LoopT, Debian's libopenmesh-dev) N times in
 * double precision, and writes the result as OBJ with every coordinate
 * printed to 17 significant digits, so the comparison sees OpenMesh's doubles
 * exactly. The OBJ parsing here is deliberately local and exact (strtod), so
 * both sides start from the same bits.
 *
 *   openmesh_loop IN.obj OUT.obj N
 *
 * Exit status: 0 done, 1 usage or I/O error, 2 the mesh was refused by
 * OpenMesh (a face that would make a non-manifold edge or vertex).
 */
#include <OpenMesh/Core/Mesh/TriMesh_ArrayKernelT.hh>
#include <OpenMesh/Tools/Subdivider/Uniform/LoopT.hh>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

struct DoubleTraits : public OpenMesh::DefaultTraits {
  typedef OpenMesh::Vec3d Point;
  typedef OpenMesh::Vec3d Normal;
};
typedef OpenMesh::TriMesh_ArrayKernelT<DoubleTraits> Mesh;

static bool read_obj(const char *path, std::vector<OpenMesh::Vec3d> &v,
                     std::vector<std::vector<long>> &f) {
  FILE *fp = std::fopen(path, "r");
  if (!fp) {
    std::fprintf(stderr, "openmesh_loop: cannot open %s: %s\n", path, std::strerror(errno));
    return false;
  }
  char line[4096];
  long lineno = 0;
  while (std::fgets(line, sizeof line, fp)) {
    lineno++;
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (p[0] == 'v' && (p[1] == ' ' || p[1] == '\t')) {
      char *end = p + 1;
      double c[3];
      for (int k = 0; k < 3; k++) {
        char *q = end;
        c[k] = std::strtod(q, &end);
        if (end == q) {
          std::fprintf(stderr, "openmesh_loop: %s:%ld: bad vertex\n", path, lineno);
          std::fclose(fp);
          return false;
        }
      }
      v.push_back(OpenMesh::Vec3d(c[0], c[1], c[2]));
    } else if (p[0] == 'f' && (p[1] == ' ' || p[1] == '\t')) {
      std::vector<long> poly;
      char *q = p + 1;
      for (;;) {
        while (*q == ' ' || *q == '\t') q++;
        if (*q == 0 || *q == '\n' || *q == '\r') break;
        char *end;
        long idx = std::strtol(q, &end, 10);
        if (end == q) {
          std::fprintf(stderr, "openmesh_loop: %s:%ld: bad face\n", path, lineno);
          std::fclose(fp);
          return false;
        }
        idx = idx < 0 ? (long)v.size() + idx : idx - 1;
        if (idx < 0 || idx >= (long)v.size()) {
          std::fprintf(stderr, "openmesh_loop: %s:%ld: index out of range\n", path, lineno);
          std::fclose(fp);
          return false;
        }
        poly.push_back(idx);
        q = end;
        while (*q && *q != ' ' && *q != '\t' && *q != '\n' && *q != '\r') q++; /* /t/n */
      }
      for (size_t i = 1; i + 1 < poly.size(); i++) f.push_back({poly[0], poly[i], poly[i + 1]});
    }
  }
  std::fclose(fp);
  return true;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: openmesh_loop IN.obj OUT.obj N\n");
    return 1;
  }
  char *end;
  long n = std::strtol(argv[3], &end, 10);
  if (*end || n < 0 || n > 8) {
    std::fprintf(stderr, "openmesh_loop: N must be 0..8\n");
    return 1;
  }
  std::vector<OpenMesh::Vec3d> pts;
  std::vector<std::vector<long>> faces;
  if (!read_obj(argv[1], pts, faces)) return 1;

  Mesh mesh;
  std::vector<Mesh::VertexHandle> vh;
  vh.reserve(pts.size());
  for (const auto &p : pts) vh.push_back(mesh.add_vertex(p));
  for (size_t i = 0; i < faces.size(); i++) {
    Mesh::FaceHandle fh = mesh.add_face(vh[faces[i][0]], vh[faces[i][1]], vh[faces[i][2]]);
    if (!fh.is_valid()) {
      std::fprintf(stderr, "openmesh_loop: OpenMesh refused face %zu\n", i);
      return 2;
    }
  }

  OpenMesh::Subdivider::Uniform::LoopT<Mesh, double> loop;
  loop.attach(mesh);
  loop((size_t)n);
  loop.detach();

  FILE *fp = std::fopen(argv[2], "w");
  if (!fp) {
    std::fprintf(stderr, "openmesh_loop: cannot write %s: %s\n", argv[2], std::strerror(errno));
    return 1;
  }
  std::fprintf(fp, "# OpenMesh LoopT x%ld\n", n);
  for (auto v : mesh.vertices()) {
    const OpenMesh::Vec3d &p = mesh.point(v);
    std::fprintf(fp, "v %.17g %.17g %.17g\n", p[0], p[1], p[2]);
  }
  for (auto fh : mesh.faces()) {
    std::fprintf(fp, "f");
    for (auto fv : mesh.fv_range(fh)) std::fprintf(fp, " %d", fv.idx() + 1);
    std::fprintf(fp, "\n");
  }
  if (std::fclose(fp) != 0) {
    std::fprintf(stderr, "openmesh_loop: write error on %s\n", argv[2]);
    return 1;
  }
  return 0;
}
