// What EtcdClient and EtcdWatch both need of etcd's wire: the range of a prefix, a key-value
// from its protobuf form, and connecting a member's channel. Internal to membership/.
#pragma once

#include <grpcpp/channel.h>

#include <chrono>
#include <memory>
#include <string>

#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "membership/etcd_client.h"

namespace lakecache::etcd_wire {

// The end of the range of keys that start with `prefix` (etcd's range_end for a prefix).
inline std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

inline EtcdKeyValue FromProto(const mvccpb::KeyValue& kv) {
  return {kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.lease()};
}

// Connects the channel if it is not (a call on a channel that failed to connect fails at once
// with the old error, and gRPC does not try again by itself until something asks it to); false if
// the member cannot be reached within `wait`.
inline bool ConnectChannel(const std::shared_ptr<grpc::Channel>& channel,
                           std::chrono::milliseconds wait) {
  if (channel->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) return true;
  return channel->WaitForConnected(std::chrono::system_clock::now() + wait);
}

}  // namespace lakecache::etcd_wire
