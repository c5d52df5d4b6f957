// Reading libvirt's XML with libxml2: the parse of an untrusted file and the few tree walks that
// place/ (running domains) and render/ (NCCL's guest view) both do. Lives in place/, the lower of
// the two modules (render/ uses place/, DESIGN.md); both link LibXml2 themselves.
#pragma once

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <memory>
#include <string>
#include <vector>

namespace polyaccel::place::xml {

using Document = std::unique_ptr<xmlDoc, void (*)(xmlDoc*)>;

// No network, no entity substitution, no DTD loading: the file is not trusted. Null when the
// text is not well-formed XML; `name` is what libxml2 calls the document.
inline Document parse_untrusted(const std::string& text, const std::string& name) {
  return Document(xmlReadMemory(text.data(), static_cast<int>(text.size()), name.c_str(), nullptr,
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING),
                  xmlFreeDoc);
}

// An attribute's value, "" when the element has none.
inline std::string attr(xmlNode* n, const char* name) {
  xmlChar* v = xmlGetProp(n, reinterpret_cast<const xmlChar*>(name));
  if (!v) return {};
  std::string s(reinterpret_cast<const char*>(v));
  xmlFree(v);
  return s;
}

inline bool has_attr(xmlNode* n, const char* name) {
  return xmlHasProp(n, reinterpret_cast<const xmlChar*>(name)) != nullptr;
}

// An element's text without the blanks around it: libvirt writes none, people may.
inline std::string text_of(xmlNode* n) {
  xmlChar* v = xmlNodeGetContent(n);
  if (!v) return {};
  std::string s(reinterpret_cast<const char*>(v));
  xmlFree(v);
  auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

// Whether `n` is an element called `name` (false for null).
inline bool is(xmlNode* n, const char* name) {
  return n && n->type == XML_ELEMENT_NODE &&
         xmlStrcmp(n->name, reinterpret_cast<const xmlChar*>(name)) == 0;
}

// The first child element of `n` called `name`; null when there is none or `n` is null.
inline xmlNode* child(xmlNode* n, const char* name) {
  for (xmlNode* c = n ? n->children : nullptr; c; c = c->next) {
    if (is(c, name)) return c;
  }
  return nullptr;
}

// Every child element of `n` called `name`, in document order; none when `n` is null.
inline std::vector<xmlNode*> children(xmlNode* n, const char* name) {
  std::vector<xmlNode*> out;
  for (xmlNode* c = n ? n->children : nullptr; c; c = c->next) {
    if (is(c, name)) out.push_back(c);
  }
  return out;
}

}  // namespace polyaccel::place::xml
