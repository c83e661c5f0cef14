#!/usr/bin/env python3
"""Checks of the bench's SVG figures and HTML report, for
tests/test_bench_figures.sh.  Each command prints what it found and exits
non-zero with the reason on a failed check.

  bench_figures.py svg FILE TIME_PANELS ROOF_PANELS
      FILE parses as XML, is an SVG with that many time and roofline
      panels, and has no empty text.
  bench_figures.py html FILE DEVICES
      FILE parses as XML (the report is written well-formed), has no
      script, no resource fetched from a network (src/href to http(s), CSS
      url() or @import), the run's metadata, a comparison table with a
      column group per device, and at least the time figure inline.
  bench_figures.py probe FILE OUT
      Writes OUT: FILE's SVG (or the HTML's body) with a script that,
      in a browser, measures every text against the SVG viewport that
      holds it and against the other texts of that viewport.
  bench_figures.py verdict DOM
      Reads the DOM a headless browser dumped after the probe ran.
"""
import re
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
XHTML_TAGS = re.compile(r"<\s*script", re.I)


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


def panels(root, kind):
    return [e for e in root.iter(SVG + "svg")
            if ("panel " + kind) in (e.get("class") or "")]


def y_ticks(panel):
    """The y axis labels of a panel (right-aligned texts left of the box)."""
    return [("".join(t.itertext()), t.get("y")) for t in panel.iter(SVG + "text")
            if t.get("text-anchor") == "end"]


def check_svg(path, want_times, want_roof):
    """want_roof is also the number of devices (a roofline each)."""
    root = ET.parse(path).getroot()
    if root.tag != SVG + "svg":
        fail("%s: the root is %s, not svg" % (path, root.tag))
    times, roof = len(panels(root, "times")), len(panels(root, "roofline"))
    if times != want_times or roof != want_roof:
        fail("%s: %d time and %d roofline panels, expected %d and %d"
             % (path, times, roof, want_times, want_roof))
    for kind in ("times", "roofline"):
        scales = set(tuple(y_ticks(p)) for p in panels(root, kind))
        if len(scales) > 1:
            fail("%s: the %s panels have different y scales: %s"
                 % (path, kind, sorted(scales)))
    legends = [e for e in root.iter(SVG + "g")
               if e.get("class") == "legend-device"]
    if len(legends) != want_roof:
        fail("%s: %d legend entries for %d devices"
             % (path, len(legends), want_roof))
    labels = ["".join(t.itertext()).split(":")[0] + ":"
              for g in legends for t in g.iter(SVG + "text")]
    for p in panels(root, "times"):
        for t in p.iter(SVG + "text"):
            if any("".join(t.itertext()).startswith(l) for l in labels):
                fail(path + ": a time panel repeats the device legend")
    texts = list(root.iter(SVG + "text"))
    empty = [t for t in texts if not "".join(t.itertext()).strip()]
    if empty:
        fail("%s: %d empty text elements" % (path, len(empty)))
    print("%s: well-formed, %d time and %d roofline panels, %d texts"
          % (path, times, roof, len(texts)))


def check_html(path, devices):
    text = open(path, encoding="utf-8").read()
    root = ET.fromstring(text)  # well-formed, or ParseError
    if XHTML_TAGS.search(text):
        fail(path + ": has a <script>")
    if re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text, re.I):
        fail(path + ": fetches a resource")
    if re.search(r"url\s*\(|@import", text, re.I):
        fail(path + ": CSS fetches a resource")
    for need in ("<h2>Run</h2>", "<h2>Devices</h2>", "<h2>Comparison</h2>",
                 "<h2>Accuracy against k</h2>", "host load at start",
                 "command", "clinformer"):
        if need not in text:
            fail("%s: no %r" % (path, need))
    figures = [e for e in root.iter()
               if e.tag.endswith("svg") and "figure" in (e.get("class") or "")]
    if not figures:
        fail(path + ": no inline figure")
    groups = text.count("<th>median ms (min..max)</th>")
    if groups != devices:
        fail("%s: %d device column groups, expected %d"
             % (path, groups, devices))
    print("%s: well-formed, self-contained, %d figures, %d device groups"
          % (path, len(figures), groups))


PROBE = """<script>
var out = [], texts = document.querySelectorAll('svg text'), i, j;
function box(e) { return e.getBoundingClientRect(); }
function viewport(svg) {
  var vb = svg.viewBox.baseVal, m = svg.getScreenCTM(), p = svg.createSVGPoint();
  var w = vb && vb.width ? vb : {x: 0, y: 0, width: svg.width.baseVal.value,
                                 height: svg.height.baseVal.value};
  p.x = w.x; p.y = w.y;
  var a = p.matrixTransform(m);
  p.x = w.x + w.width; p.y = w.y + w.height;
  var c = p.matrixTransform(m);
  return {left: a.x, top: a.y, right: c.x, bottom: c.y};
}
for (i = 0; i < texts.length; i++) {
  var b = box(texts[i]), v = viewport(texts[i].ownerSVGElement);
  if (b.width <= 0) out.push('INVISIBLE ' + texts[i].textContent);
  if (b.left < v.left - 0.5 || b.right > v.right + 0.5 ||
      b.top < v.top - 0.5 || b.bottom > v.bottom + 0.5)
    out.push('CLIPPED ' + texts[i].textContent + ' [' +
             [b.left, b.right, v.left, v.right].map(Math.round) + ']');
  for (j = 0; j < i; j++) {
    if (texts[j].ownerSVGElement !== texts[i].ownerSVGElement) continue;
    var c = box(texts[j]);
    if (Math.min(b.right, c.right) - Math.max(b.left, c.left) > 1 &&
        Math.min(b.bottom, c.bottom) - Math.max(b.top, c.top) > 1)
      out.push('OVERLAP ' + texts[i].textContent + ' | ' +
               texts[j].textContent);
  }
}
var pre = document.createElement('pre');
pre.id = 'verdict';
pre.textContent = 'TEXTS ' + texts.length + '\\n' + out.join('\\n') +
                  '\\nEND';
document.body.appendChild(pre);
</script>"""


def probe(path, out):
    text = open(path, encoding="utf-8").read()
    if path.endswith(".svg"):
        text = re.sub(r"^<\?xml[^>]*>\s*", "", text)
        text = "<!DOCTYPE html><html><body>" + text + "</body></html>"
    text = text.replace("</body>", PROBE + "</body>")
    open(out, "w", encoding="utf-8").write(text)


def verdict(dom):
    text = open(dom, encoding="utf-8", errors="replace").read()
    m = re.search(r"TEXTS (\d+)\n(.*?)\nEND", text, re.S)
    if m is None:
        fail(dom + ": the probe did not run")
    problems = [p for p in m.group(2).split("\n") if p.strip()]
    for p in problems:
        print("  " + p)
    if int(m.group(1)) == 0:
        fail(dom + ": no text rendered")
    if problems:
        fail("%s: %d of %s texts clipped or overlapping"
             % (dom, len(problems), m.group(1)))
    print("%s: %s texts, none clipped or overlapping" % (dom, m.group(1)))


def main(argv):
    try:
        if argv[1] == "svg":
            check_svg(argv[2], int(argv[3]), int(argv[4]))
        elif argv[1] == "html":
            check_html(argv[2], int(argv[3]))
        elif argv[1] == "probe":
            probe(argv[2], argv[3])
        elif argv[1] == "verdict":
            verdict(argv[2])
        else:
            fail("unknown command " + argv[1])
    except ET.ParseError as e:
        fail("%s: not well-formed: %s" % (argv[2], e))


if __name__ == "__main__":
    main(sys.argv)
