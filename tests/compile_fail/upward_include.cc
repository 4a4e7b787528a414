// Compiled as a file of the cache layer (it links lakecache_cache and nothing above it), this
// must fail at the second include: fs/ is a layer above cache/, so its headers are not in scope.
// The first include shows the file's own layer is found, so the failure is the layering's.
#include "cache/block_store.h"
#include "fs/file_system.h"
