// ObjectWrites: the writes a worker makes for mounts, which hold no store credentials: the body
// of a Put or of one multipart part (streamed to it in chunks), and the calls around them
// (create, complete and abort an upload, delete, copy, list uploads), on the namespace's store.
//
// A key must lie in its namespace; a namespace with `write: false` refuses everything; deleting
// an object needs `allow_delete` (a folder's marker "dir/" excepted: rmdir). Overwrites are the
// mount's to refuse (it knows what it opened). Bodies are held in memory one at a time per call,
// all calls together within a WriteBudget (a call waits for room up to 30 s, then fails as
// Unavailable: the mount asks another worker; a body larger than the budget is refused).
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "common/result.h"
#include "common/write_budget.h"
#include "meta/namespace_table.h"
#include "rpc/lakecache.pb.h"

namespace lakecache {

class ObjectWrites {
 public:
  ObjectWrites(NamespaceTable* namespaces, uint64_t budget)
      : namespaces_(namespaces), budget_(budget) {}

  // One body: `first` names the call and carries the first bytes; `next` fills the next chunk
  // (false at the end of the stream).
  Result<rpc::WrittenObject> Body(const rpc::WriteBodyChunk& first,
                                  const std::function<bool(rpc::WriteBodyChunk*)>& next);
  Result<rpc::WriteCallResponse> Call(const rpc::WriteCallRequest& request);

  const WriteBudget& budget() const { return budget_; }

 private:
  // The namespace `name`, if it may be written and `key` lies in it (`whole_namespace`: or is
  // its prefix).
  Result<Namespace*> Writable(const std::string& name, const std::string& key,
                              bool whole_namespace = false) const;

  NamespaceTable* const namespaces_;
  WriteBudget budget_;
};

}  // namespace lakecache
