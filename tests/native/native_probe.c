/* A reader of the native data path for the tests, in C (it uses the C ABI as any other language
 * would). Usage:
 *   native_probe attach PATH            attach, print "attached MOUNTPOINT"; exit 1 with the error
 *   native_probe sum PATH               read the whole file; print "bytes=N fnv=HEX"
 *   native_probe hold PATH COUNT        hold COUNT views of 1 MiB ranges; print "holding COUNT";
 *                                       then wait until killed
 *   native_probe loop PATH SECONDS      read the file again and again for SECONDS, each pass
 *                                       compared with the first; print "passes=P errors=E wrong=W"
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lakecache_native.h"

static uint64_t Fnv(const unsigned char* p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static int Die(const char* what) {
  fprintf(stderr, "%s: %s (errno %d)\n", what, lc_last_error(), errno);
  return 1;
}

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  lc_client* c = lc_attach(argv[2]);
  if (c == NULL) return Die("attach");
  if (strcmp(argv[1], "attach") == 0) {
    printf("attached %s\n", lc_mountpoint(c));
    lc_detach(c);
    return 0;
  }
  lc_file* f = lc_open(c, argv[2]);
  if (f == NULL) return Die("open");
  uint64_t size = lc_size(f);
  unsigned char* buf = malloc(size + 1);
  if (strcmp(argv[1], "sum") == 0) {
    ssize_t n = lc_pread(f, buf, size, 0);
    if (n < 0) return Die("read");
    printf("bytes=%zd fnv=%016llx\n", n, (unsigned long long)Fnv(buf, (size_t)n, 14695981039346656037ull));
    free(buf);
    lc_close(f);
    lc_detach(c);
    return 0;
  }
  if (strcmp(argv[1], "hold") == 0 && argc > 3) {
    int count = atoi(argv[3]);
    for (int i = 0; i < count; ++i) {
      lc_view v;
      uint64_t offset = ((uint64_t)i << 20) % (size ? size : 1);
      if (lc_view_range(f, offset, 1 << 20, &v) != 0) return Die("view");
    }
    printf("holding %d\n", count);
    fflush(stdout);
    for (;;) pause();
  }
  if (strcmp(argv[1], "loop") == 0 && argc > 3) {
    double until = Now() + atof(argv[3]);
    unsigned char* first = malloc(size + 1);
    if (lc_pread(f, first, size, 0) != (ssize_t)size) return Die("first read");
    long passes = 0, errors = 0, wrong = 0;
    printf("reading\n");
    fflush(stdout);
    while (Now() < until) {
      ssize_t n = lc_pread(f, buf, size, 0);
      if (n != (ssize_t)size) {
        ++errors;
        fprintf(stderr, "pass %ld: %zd: %s\n", passes, n, lc_last_error());
      } else if (memcmp(buf, first, size) != 0) {
        ++wrong;
      }
      ++passes;
    }
    printf("passes=%ld errors=%ld wrong=%ld\n", passes, errors, wrong);
    free(first);
    free(buf);
    lc_close(f);
    lc_detach(c);
    return errors || wrong ? 1 : 0;
  }
  return 2;
}
