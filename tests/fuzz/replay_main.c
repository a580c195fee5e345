/*
 * replay_main.c: runs a fuzz target over files (the seed corpus and past
 * findings) without libFuzzer, so every build checks them as regression
 * tests. Usage: fuzz_X_replay FILE_OR_DIR...
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return 1;
  }
  uint8_t *buf = malloc(1 << 20);
  size_t n = buf ? fread(buf, 1, 1 << 20, f) : 0;
  fclose(f);
  if (!buf) return 1;
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  int files = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st)) {
      fprintf(stderr, "cannot stat %s\n", argv[i]);
      return 1;
    }
    if (S_ISDIR(st.st_mode)) {
      DIR *d = opendir(argv[i]);
      struct dirent *de;
      while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", argv[i], de->d_name);
        bad += run_file(p);
        files++;
      }
      if (d) closedir(d);
    } else {
      bad += run_file(argv[i]);
      files++;
    }
  }
  printf("replayed %d inputs\n", files);
  return bad || files == 0 ? 1 : 0;
}
