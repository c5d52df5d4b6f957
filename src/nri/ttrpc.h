// NRI's transport, as containerd and CRI-O speak it to an external plugin on
// /var/run/nri/nri.sock: one Unix connection multiplexed into two (github.com/containerd/nri
// pkg/net/multiplex: frames of an 8-byte header, connection id and payload length, big-endian),
// each carrying ttrpc messages (github.com/containerd/ttrpc: a 10-byte header, payload length,
// stream id, type, flags, big-endian, then a ttrpc.Request or ttrpc.Response). On connection 1 the
// runtime calls the plugin's service, on connection 2 the plugin calls the runtime's. Pure: bytes
// in, messages out, and back; the socket is the plugin's (plugin.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace polyaccel::nri {

inline constexpr std::uint32_t kPluginServiceConn = 1;   // the runtime calls the plugin
inline constexpr std::uint32_t kRuntimeServiceConn = 2;  // the plugin calls the runtime
inline constexpr std::size_t kMuxHeaderSize = 8;
inline constexpr std::size_t kTtrpcHeaderSize = 10;
inline constexpr std::size_t kTtrpcMaxPayload = 4u << 20;  // ttrpc's messageLengthMax
// The multiplexer's largest frame payload: one whole ttrpc message.
inline constexpr std::size_t kMuxMaxPayload = kTtrpcHeaderSize + kTtrpcMaxPayload;

enum class MessageType : std::uint8_t { request = 1, response = 2, data = 3 };

struct TtrpcMessage {
  std::uint32_t conn = 0;    // the multiplexed connection
  std::uint32_t stream = 0;  // ttrpc stream id: odd for the side that calls
  MessageType type = MessageType::request;
  std::uint8_t flags = 0;
  std::string payload;  // a serialised ttrpc.Request or ttrpc.Response
};

// The trunk's bytes in, whole ttrpc messages out. A ttrpc message may span several frames (the
// writer's buffer splits it) and a frame may hold parts of two. Memory is bounded: a frame or a
// message over its limit, a connection other than 1 and 2, or an unknown message type is an
// Error, after which the connection is to be closed.
class MessageReader {
 public:
  Status feed(std::string_view bytes, std::vector<TtrpcMessage>& out);

 private:
  std::string frame_;                           // an incomplete frame, its header included
  std::map<std::uint32_t, std::string> conns_;  // per connection: an incomplete message
};

// A message as the trunk carries it: frames of at most kMuxMaxPayload. The payload must be at
// most kTtrpcMaxPayload (checked by the caller: an Error there, never a wrap).
std::string encode_message(const TtrpcMessage& message);

}  // namespace polyaccel::nri
