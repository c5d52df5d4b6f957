#include "nri/ttrpc.h"

namespace polyaccel::nri {
namespace {

std::uint32_t be32(std::string_view b, std::size_t at) {
  return (std::uint32_t(std::uint8_t(b[at])) << 24) |
         (std::uint32_t(std::uint8_t(b[at + 1])) << 16) |
         (std::uint32_t(std::uint8_t(b[at + 2])) << 8) | std::uint32_t(std::uint8_t(b[at + 3]));
}

void put32(std::string& out, std::uint32_t v) {
  out.push_back(char(v >> 24));
  out.push_back(char(v >> 16));
  out.push_back(char(v >> 8));
  out.push_back(char(v));
}

Error bad_stream(const std::string& problem) {
  return Error{ErrorCode::bad_input, "the NRI connection", problem, {}};
}

}  // namespace

Status MessageReader::feed(std::string_view bytes, std::vector<TtrpcMessage>& out) {
  frame_.append(bytes);
  std::size_t at = 0;
  while (frame_.size() - at >= kMuxHeaderSize) {
    const std::uint32_t conn = be32(frame_, at);
    const std::uint32_t size = be32(frame_, at + 4);
    if (conn != kPluginServiceConn && conn != kRuntimeServiceConn)
      return bad_stream("a frame for connection " + std::to_string(conn) + " (only 1 and 2 exist)");
    if (size > kMuxMaxPayload)
      return bad_stream("a frame of " + std::to_string(size) + " bytes (at most " +
                        std::to_string(kMuxMaxPayload) + ")");
    if (frame_.size() - at - kMuxHeaderSize < size) break;
    std::string& stream = conns_[conn];
    stream.append(frame_, at + kMuxHeaderSize, size);
    at += kMuxHeaderSize + size;
    // Whole ttrpc messages of this connection.
    std::size_t m = 0;
    while (stream.size() - m >= kTtrpcHeaderSize) {
      const std::uint32_t length = be32(stream, m);
      if (length > kTtrpcMaxPayload)
        return bad_stream("a ttrpc message of " + std::to_string(length) + " bytes (at most " +
                          std::to_string(kTtrpcMaxPayload) + ")");
      const auto type = std::uint8_t(stream[m + 8]);
      if (type < 1 || type > 3)
        return bad_stream("a ttrpc message of unknown type " + std::to_string(type));
      if (stream.size() - m - kTtrpcHeaderSize < length) break;
      TtrpcMessage msg;
      msg.conn = conn;
      msg.stream = be32(stream, m + 4);
      msg.type = MessageType(type);
      msg.flags = std::uint8_t(stream[m + 9]);
      msg.payload = stream.substr(m + kTtrpcHeaderSize, length);
      out.push_back(std::move(msg));
      m += kTtrpcHeaderSize + length;
    }
    stream.erase(0, m);
  }
  frame_.erase(0, at);
  return Ok{};
}

std::string encode_message(const TtrpcMessage& message) {
  std::string body;
  body.reserve(kTtrpcHeaderSize + message.payload.size());
  put32(body, std::uint32_t(message.payload.size()));
  put32(body, message.stream);
  body.push_back(char(message.type));
  body.push_back(char(message.flags));
  body += message.payload;
  std::string out;
  out.reserve(body.size() + kMuxHeaderSize * (1 + body.size() / kMuxMaxPayload));
  for (std::size_t at = 0; at < body.size(); at += kMuxMaxPayload) {
    const std::size_t n = std::min(kMuxMaxPayload, body.size() - at);
    put32(out, message.conn);
    put32(out, std::uint32_t(n));
    out.append(body, at, n);
  }
  return out;
}

}  // namespace polyaccel::nri
