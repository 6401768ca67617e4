#include "modes/html_report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "modes/plot_svg.h"

/* The page's behaviour, for every view:
 *  - hovering a heatmap cell shows its panel and value (the cell's title);
 *  - clicking a cell of a similarity panel shows the similarity of its two
 *    positions from the data; clicking a bias or weight cell its value;
 *  - a head picker (when the data has attention weights) shows one head's
 *    panels and its entropy;
 *  - hovering a curve's point (the study's) shows its series and values;
 *  - the page's fragment selects the same without a mouse, for links and
 *    headless browsers: #head=LAYER,HEAD, #cos=VARIANT,A,B, or
 *    #nll=SERIES,WINDOW (the study: that point's NLL and standard error). */
static const char SCRIPT[] =
    "(function () {\n"
    "  var data = JSON.parse(document.getElementById('posenc-data').textContent);\n"
    "  var out = document.getElementById('readout');\n"
    "  function say(text) { out.textContent = text; }\n"
    "  function panels(figure) { return figure.querySelectorAll('g.panel'); }\n"
    "  function label(panel) { return panel.querySelector('text.panel-label').textContent; }\n"
    "  document.querySelectorAll('g.panel rect').forEach(function (cell) {\n"
    "    var t = cell.querySelector('title');\n"
    "    if (!t) return;\n"
    "    cell.addEventListener('mouseover', function () {\n"
    "      say(label(cell.closest('g.panel')) + ' ' + t.textContent);\n"
    "    });\n"
    "  });\n"
    "  document.querySelectorAll('circle').forEach(function (point) {\n"
    "    var t = point.querySelector('title');\n"
    "    if (t) point.addEventListener('mouseover', function () { say(t.textContent); });\n"
    "  });\n"
    "  function nll(s, w) {\n"
    "    var series = data.series[s];\n"
    "    say(series.label + ': window ' + data.windows[w] + ': NLL ' + String(series.nll[w]) +\n"
    "        ' +- ' + String(series.se[w]));\n"
    "  }\n"
    "  function cosine(v, a, b) {\n"
    "    var variant = data.variants[v];\n"
    "    say(variant.pe + ': cos(position ' + a + ', position ' + b + ') = ' +\n"
    "        String(variant.cosine[a][b]));\n"
    "  }\n"
    "  document.querySelectorAll('figure[data-view=vectors]').forEach(function (fig) {\n"
    "    var v = data.variants.findIndex(function (x) { return x.pe === fig.dataset.variant; });\n"
    "    var sim = panels(fig)[1];\n"
    "    sim.querySelectorAll('rect title').forEach(function (t) {\n"
    "      var rc = t.textContent.split(':')[0].split(',');\n"
    "      t.parentNode.addEventListener('click', function () { cosine(v, +rc[0], +rc[1]); });\n"
    "    });\n"
    "  });\n"
    "  var heads = [];\n"
    "  (data.variants || []).forEach(function (v) {\n"
    "    (v.weights || []).forEach(function (w) {\n"
    "      if (!heads.some(function (h) { return h[0] === w.layer && h[1] === w.head; }))\n"
    "        heads.push([w.layer, w.head]);\n"
    "    });\n"
    "  });\n"
    "  function pick(layer, head) {\n"
    "    var name = 'layer ' + layer + ', head ' + head;\n"
    "    document.querySelectorAll('figure[data-view=weights] g.panel').forEach(function (p) {\n"
    "      p.style.display = label(p) === name ? '' : 'none';\n"
    "    });\n"
    "    say(data.variants.map(function (v) {\n"
    "      return v.pe + ': ' + name + ': entropy ' + String(v.entropy[layer][head]);\n"
    "    }).join('; '));\n"
    "  }\n"
    "  if (heads.length) {\n"
    "    var select = document.getElementById('pick');\n"
    "    heads.forEach(function (h, i) {\n"
    "      var o = document.createElement('option');\n"
    "      o.value = i;\n"
    "      o.textContent = 'layer ' + h[0] + ', head ' + h[1];\n"
    "      select.appendChild(o);\n"
    "    });\n"
    "    select.hidden = false;\n"
    "    select.addEventListener('change', function () {\n"
    "      pick(heads[select.value][0], heads[select.value][1]);\n"
    "    });\n"
    "  }\n"
    "  var hash = location.hash.slice(1).split('=');\n"
    "  var args = (hash[1] || '').split(',').map(Number);\n"
    "  if (hash[0] === 'head') pick(args[0], args[1]);\n"
    "  if (hash[0] === 'cos') cosine(args[0], args[1], args[2]);\n"
    "  if (hash[0] === 'nll') nll(args[0], args[1]);\n"
    "})();\n";

FILE *html_report_open(const char *path, const char *title, const char *how_to_read,
                       PosencError *err) {
    FILE *f = fopen(path, "w");
    if (!f) {
        posenc_error(err, "cannot write '%s': %s", path, strerror(errno));
        return NULL;
    }
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", f);
    svg_escape_text(f, title);
    fputs("</title>\n<style>\n"
          "body { font-family: sans-serif; margin: 1em 2em; }\n"
          "figure { margin: 1em 0; }\n"
          "#readout { display: block; min-height: 1.5em; font-family: monospace; }\n"
          "g.panel rect[fill]:hover { stroke: black; }\n"
          "table { border-collapse: collapse; margin: 1em 0; }\n"
          "caption { text-align: left; padding-bottom: 0.3em; }\n"
          "th, td { padding: 0.1em 0.6em; text-align: right; font-variant-numeric: tabular-nums; }\n"
          "th:first-child, td:first-child { text-align: left; }\n"
          "thead th { border-bottom: 1px solid #888; }\n"
          "</style>\n</head>\n<body>\n<h1>", f);
    svg_escape_text(f, title);
    fputs("</h1>\n<p>", f);
    svg_escape_text(f, how_to_read);
    fputs("</p>\n<select id=\"pick\" hidden></select>\n<output id=\"readout\"></output>\n", f);
    return f;
}

/* Copies the JSON, "</" escaped: JSON allows "\/" inside strings, and
 * outside strings "</" cannot occur. */
void html_report_data(FILE *f, void (*write)(FILE *out, const void *arg), const void *arg) {
    char *json = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&json, &len);
    if (!mem) posenc_out_of_memory(1, 1, "the report's data");
    write(mem, arg);
    if (fclose(mem) != 0) posenc_out_of_memory(len, 1, "the report's data");
    fputs("<script type=\"application/json\" id=\"posenc-data\">\n", f);
    for (size_t i = 0; i < len; i++) {
        if (json[i] == '<' && i + 1 < len && json[i + 1] == '/') fputs("<\\", f);
        else fputc(json[i], f);
    }
    fputs("</script>\n", f);
    free(json);
}

int html_report_close(FILE *f, const char *path, PosencError *err) {
    fprintf(f, "<script>\n%s</script>\n</body>\n</html>\n", SCRIPT);
    if (fclose(f) != 0) return posenc_error(err, "error writing '%s'", path);
    return 0;
}
