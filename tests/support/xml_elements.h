// xml_elements.h — reads back an SVG the programs write: checks that it is
// well-formed XML (one root, every tag closed in order, attributes quoted
// once each, text and values free of a bare '<' or '&') and lists its
// elements with their attributes. Written here, sharing nothing with the
// writers; enough XML for what dpt writes (no DTD, CDATA or comments).
#pragma once

#include <cctype>
#include <map>
#include <string>
#include <vector>

namespace dpt_test {

/// One element: its tag, attributes, and the classes of its open ancestors.
struct XmlElement {
  std::string tag;
  std::map<std::string, std::string> attributes;
  std::vector<std::size_t> ancestors;  ///< indices (in XmlDocument::elements) of the enclosing elements, outermost first
  std::string attribute(const std::string& name) const {
    auto it = attributes.find(name);
    return it == attributes.end() ? "" : it->second;
  }
};

/// The parse: `problem` is "" when the text is well-formed.
struct XmlDocument {
  std::vector<XmlElement> elements;  ///< in document order
  std::string problem;
};

namespace xml_detail {
inline bool entities_ok(const std::string& text) {  // '&' starts one of XML's five entities or a character reference
  for (std::size_t i = text.find('&'); i != std::string::npos; i = text.find('&', i + 1)) {
    const std::size_t semi = text.find(';', i);
    if (semi == std::string::npos) return false;
    const std::string name = text.substr(i + 1, semi - i - 1);
    if (name != "lt" && name != "gt" && name != "amp" && name != "quot" && name != "apos" && (name.empty() || name[0] != '#'))
      return false;
  }
  return true;
}
}  // namespace xml_detail

inline XmlDocument parse_xml(const std::string& text) {
  XmlDocument doc;
  std::vector<std::size_t> open;  // indices of the open elements
  int roots = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t lt = text.find('<', i);
    const std::string between = text.substr(i, lt == std::string::npos ? std::string::npos : lt - i);
    if (!xml_detail::entities_ok(between)) return doc.problem = "a bare '&' in text: " + between, doc;
    if (open.empty() && between.find_first_not_of(" \n\r\t") != std::string::npos)
      return doc.problem = "text outside the root element", doc;
    if (lt == std::string::npos) break;
    const std::size_t gt = text.find('>', lt);
    if (gt == std::string::npos) return doc.problem = "a tag is not closed", doc;
    std::string tag = text.substr(lt + 1, gt - lt - 1);
    i = gt + 1;
    if (tag.rfind("?xml", 0) == 0) continue;
    if (!tag.empty() && tag[0] == '/') {  // a closing tag: the innermost open one
      if (open.empty() || doc.elements[open.back()].tag != tag.substr(1)) return doc.problem = "</" + tag.substr(1) + "> closes nothing open", doc;
      open.pop_back();
      continue;
    }
    const bool empty = !tag.empty() && tag.back() == '/';
    if (empty) tag.pop_back();
    XmlElement e;
    std::size_t k = 0;
    while (k < tag.size() && !std::isspace(static_cast<unsigned char>(tag[k]))) e.tag += tag[k++];
    if (e.tag.empty()) return doc.problem = "a tag without a name", doc;
    while (true) {  // name="value" pairs
      while (k < tag.size() && std::isspace(static_cast<unsigned char>(tag[k]))) ++k;
      if (k >= tag.size()) break;
      const std::size_t eq = tag.find('=', k);
      if (eq == std::string::npos || eq + 1 >= tag.size() || tag[eq + 1] != '"')
        return doc.problem = "an attribute without a quoted value in <" + e.tag + ">", doc;
      const std::size_t close = tag.find('"', eq + 2);
      if (close == std::string::npos) return doc.problem = "an unclosed attribute value in <" + e.tag + ">", doc;
      const std::string name = tag.substr(k, eq - k), value = tag.substr(eq + 2, close - eq - 2);
      if (value.find('<') != std::string::npos || !xml_detail::entities_ok(value))
        return doc.problem = "a bare '<' or '&' in attribute " + name, doc;
      if (!e.attributes.emplace(name, value).second) return doc.problem = "attribute " + name + " twice", doc;
      k = close + 1;
    }
    if (open.empty() && ++roots > 1) return doc.problem = "more than one root element", doc;
    e.ancestors = open;
    doc.elements.push_back(e);
    if (!empty) open.push_back(doc.elements.size() - 1);
  }
  if (!open.empty()) doc.problem = "<" + doc.elements[open.back()].tag + "> is never closed";
  else if (roots != 1) doc.problem = "no root element";
  return doc;
}

}  // namespace dpt_test
