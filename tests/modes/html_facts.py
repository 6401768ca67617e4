#!/usr/bin/env python3
"""What posenc's --html page holds, one fact a line, for the tests: its
title, the figures (view and variant), every table row (its non-empty
cells, space-separated, as a text table reads), whether every inline SVG is
well-formed XML, the data element's JSON (the views' variants, a ppl run's
positions per variant, or the study's series with their NLL per window),
references to anything outside the file, the scripts; and, with --expect,
the text the page's script must
show for a fragment (#head=L,H, #cos=V,A,B or #nll=S,W), computed here from
the data.
Fails on a page whose HTML, SVG or JSON does not parse.

    html_facts.py PAGE.html [--expect head=1,2]"""
import html.parser
import json
import sys
import xml.etree.ElementTree as ET


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.figures, self.external, self.scripts = [], [], 0, []
        self.title, self.data, self.in_title, self.in_script = "", None, False, None
        self.rows, self.cell = [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag not in ("meta", "br", "img", "input", "link"):
            self.stack.append(tag)
        if tag == "link" or any(k in ("src", "href") for k in a):
            self.external += 1
        if tag == "figure":
            self.figures.append((a.get("data-view"), a.get("data-variant")))
        if tag == "title" and "head" in self.stack:
            self.in_title = True
        if tag == "script":
            self.in_script = a.get("type", "text/javascript")
            self.scripts.append(self.in_script)
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th"):
            self.cell = ""

    def handle_startendtag(self, tag, attrs):
        if any(k in ("src", "href") for k, _ in attrs):
            self.external += 1

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            raise ValueError("unbalanced </%s> (open: %s)" % (tag, self.stack[-3:]))
        self.stack.pop()
        self.in_title = False
        self.in_script = None
        if tag in ("td", "th"):
            self.rows[-1].append(self.cell)
            self.cell = None

    def handle_data(self, d):
        if self.in_title:
            self.title += d
        if self.cell is not None:
            self.cell += d
        if self.in_script == "application/json":
            self.data = json.loads(d)


def js_string(x):
    """String(x) in JavaScript for the numbers the page shows."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def expect(data, arg):
    what, values = arg.split("=")
    n = [int(x) for x in values.split(",")]
    if what == "nll":
        s = data["series"][n[0]]
        return "%s: window %d: NLL %s +- %s" % (s["label"], data["windows"][n[1]], js_string(s["nll"][n[1]]),
                                                js_string(s["se"][n[1]]))
    if what == "head":
        return "; ".join("%s: layer %d, head %d: entropy %s" % (v["pe"], n[0], n[1],
                         js_string(v["entropy"][n[0]][n[1]])) for v in data["variants"])
    v = data["variants"][n[0]]
    return "%s: cos(position %d, position %d) = %s" % (v["pe"], n[1], n[2], js_string(v["cosine"][n[1]][n[2]]))


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    page = Page()
    page.feed(text)
    page.close()
    if page.stack:
        raise ValueError("unclosed elements: %s" % page.stack)
    print("doctype=%d" % text.startswith("<!DOCTYPE html>"))
    print("title=%s" % page.title)
    for view, variant in page.figures:
        print("figure=%s|%s" % (view, variant))
    svgs, at = 0, 0
    while True:
        start = text.find("<svg", at)
        if start < 0:
            break
        end = text.index("</svg>", start) + 6
        ET.fromstring(text[start:end])
        svgs, at = svgs + 1, end
    for row in page.rows:
        print("table_row=%s" % " ".join(c for c in row if c))
    print("svg_wellformed=%d" % svgs)
    print("external=%d" % page.external)
    print("scripts=%s" % ",".join(page.scripts))
    if "variants" in page.data:
        print("data_variants=%s" % ",".join(v["pe"] for v in page.data["variants"]))
    if "nll_by_position" in page.data:
        print("data_positions=%s" % ",".join(str(len(v)) for v in page.data["nll_by_position"]))
    for s in page.data.get("series", []):
        print("series=%s|%s" % (s["label"], " ".join("-" if v is None else "%9.4f" % v for v in s["nll"])))
    if len(sys.argv) > 3 and sys.argv[2] == "--expect":
        print("expect=%s" % expect(page.data, sys.argv[3]))


if __name__ == "__main__":
    main()
