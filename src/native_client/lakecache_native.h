/* lakecache's native data path: read files of a lakecache mount beside FUSE, from the node's
 * memory, without a copy by the kernel.
 *
 * A reader attaches to the server of the mount that holds a path (lc_attach), opens files of that
 * mount (lc_open by path: the server checks the reader's uid and groups as the kernel checks an
 * open through the mount; lc_open_fd with a descriptor opened through the mount), and reads them:
 * lc_pread copies into the caller's buffer; lc_view hands out the bytes where they lie in the
 * node's memory (a co-located worker's memory, or the mount's own), valid until lc_release;
 * lc_read_many submits a batch of reads (files by handle or by path) and completes them in any
 * order. Reads see the version of the object the file was opened on, or fail; never a mix.
 *
 * When the mount's server restarts (a crash, `lakecache mount --takeover`), the library attaches
 * to the new one, opens its files again and retries reads in flight; views handed out before stay
 * readable. A client belongs to the process that attached it: in a child after fork() every call
 * attaches anew. Calls on one client are serialised; use one client per thread for parallel I/O.
 *
 * Every call that can fail returns -1 (or NULL) and leaves a message in lc_last_error() (per
 * thread); errno is set as a read(2) would set it. Link with -llakecache_native.
 *
 * Paths: absolute paths under the mountpoint, or relative to it. Memory: each client may hold at
 * most the mount's anchor budget in views at once (a read past it fails with ENOBUFS until views
 * are released); a view stays valid after lc_close of its file, until lc_release or lc_detach.
 */
#ifndef LAKECACHE_NATIVE_H_
#define LAKECACHE_NATIVE_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LC_NATIVE_VERSION 1
#define LC_API __attribute__((visibility("default")))

typedef struct lc_client lc_client;
typedef struct lc_file lc_file;

/* Attaches to the server of the lakecache mount that holds `path` (any path inside it). */
LC_API lc_client* lc_attach(const char* path);
/* Closes the client's files, releases its views and ends its session. */
LC_API void lc_detach(lc_client* client);
/* The mount's root, as lc_attach found it. */
LC_API const char* lc_mountpoint(const lc_client* client);
/* LC_NATIVE_VERSION of the library loaded (to check it against the header compiled against). */
LC_API int lc_version(void);

/* Opens the file at `path` (absolute, or relative to the mountpoint) for reading. */
LC_API lc_file* lc_open(lc_client* client, const char* path);
/* Opens the file a descriptor open for reading through the mount refers to (the descriptor stays
 * the caller's). */
LC_API lc_file* lc_open_fd(lc_client* client, int fd);
LC_API uint64_t lc_size(const lc_file* file);
/* The file's cache block size: reads aligned to it and as long are served whole, by reference. */
LC_API uint64_t lc_block_size(const lc_file* file);
LC_API void lc_close(lc_file* file);

/* Reads up to `length` bytes at `offset` into `buf`: the bytes read (0 at the end), or -1. */
LC_API ssize_t lc_pread(lc_file* file, void* buf, size_t length, uint64_t offset);

/* A range of the file in the node's memory, read-only. */
typedef struct lc_view {
  const void* data;
  size_t length;  /* short at the end of the file or of one of its blocks */
  uint64_t token; /* for lc_release */
} lc_view;
/* Up to `length` bytes at `offset`, in place: 0, or -1. `view->length` 0 means the end. */
LC_API int lc_view_range(lc_file* file, uint64_t offset, size_t length, lc_view* view);
/* Lets go of a view (one with token 0, or released already, is left as it is). */
LC_API void lc_release(lc_client* client, lc_view* view);

/* One read of a batch: `file`, or when it is NULL the file at `path`; `length` bytes at `offset`
 * (length UINT64_MAX: to the end of the file) into `buf` (which must hold them; with buf NULL the
 * library allocates it with malloc, and the caller frees it whether the read succeeded or not).
 * On completion `length` holds what was asked within the file, `result` the bytes read or -errno,
 * and `error` (when not NULL) a message owned by the client, valid until its next call. */
typedef struct lc_read {
  lc_file* file;
  const char* path;
  uint64_t offset;
  uint64_t length;
  void* buf;
  int64_t result;
  const char* error;
} lc_read;
/* Runs every read of `reads`: the number that succeeded; -1 only when the client itself failed. */
LC_API ssize_t lc_read_many(lc_client* client, lc_read* reads, size_t count);

/* The message of this thread's last failure. */
LC_API const char* lc_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* LAKECACHE_NATIVE_H_ */
