// Reading back the XML the renderers write (libxml2): what the render tests share.
#pragma once

#include <libxml/tree.h>

#include <string>

namespace polyaccel::testing {

// An attribute's value, "" when the element has none.
inline std::string attr(xmlNode* n, const char* name) {
  xmlChar* v = xmlGetProp(n, reinterpret_cast<const xmlChar*>(name));
  if (!v) return {};
  std::string s(reinterpret_cast<const char*>(v));
  xmlFree(v);
  return s;
}

}  // namespace polyaccel::testing
