#!/usr/bin/env python3
"""What a reader of posenc's charts sees, one fact a line, for the tests to
look for: the series (legend label and note, dots drawn, dashed stretches),
the heatmap panels (label, cells drawn), every text, and whether the
trained-context label sits above the plot.  Fails (ParseError) on anything
but well-formed XML.

    svg_facts.py CHART.svg [MORE.svg ...]

With several files each line starts with the file's name."""
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def facts(path):
    root = ET.parse(path).getroot()
    series = [g for g in root.iter(NS + "g") if g.get("class") == "series"]
    yield "series=%d" % len(series)
    for g in series:
        texts = {t.get("class"): t.text for t in g.iter(NS + "text")}
        yield "legend=%s|%s" % (texts["legend"], texts.get("legend-note"))
        yield "points=%s|%d" % (texts["legend"], len(list(g.iter(NS + "circle"))))
    dashed = [p for g in series for p in g.iter(NS + "polyline") if p.get("stroke-dasharray")]
    yield "dashed=%d" % len(dashed)
    for g in root.iter(NS + "g"):
        if g.get("class") == "panel":
            label = [t.text for t in g.iter(NS + "text") if t.get("class") == "panel-label"][0]
            cells = [r for r in g.iter(NS + "rect") if r.get("fill") != "none"]
            yield "panel=%s cells=%d" % (label, len(cells))
    for t in root.iter(NS + "text"):
        yield "text=%s" % t.text
    frames = [r for r in root.iter(NS + "rect") if r.get("fill") == "none"]
    markers = [t for t in root.iter(NS + "text") if (t.text or "").startswith("trained context")]
    if frames and markers:
        above = float(markers[0].get("y")) < float(frames[0].get("y"))
        yield "marker_above_plot=%d" % above


def main():
    for path in sys.argv[1:]:
        prefix = path.rsplit("/", 1)[-1] + " " if len(sys.argv) > 2 else ""
        for fact in facts(path):
            print(prefix + fact)


if __name__ == "__main__":
    main()
