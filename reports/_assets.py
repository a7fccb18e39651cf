"""The HTML report's inline style sheet and script: constants, no data.

The script only reads numbers from `data-*` attributes and writes attributes back (zoom, the
time / event-order switch, the table filter, copying the replay command); it never builds markup
from trace text, so nothing a trace holds can become code. A page opened as
`report.html#view=order,4` starts on that scale and zoom. System fonts only, no network.
"""

from __future__ import annotations

__all__ = ["CSS", "CSP", "SCRIPT"]

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)
"""The page may load nothing from anywhere: everything it needs is inline."""

CSS = """
:root{--fg:#1b1f24;--muted:#5c6670;--line:#d8dee4;--bg:#fff;--zebra:#f6f8fa}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
background:var(--bg)}
main{padding:0 20px 40px}
code,pre,.mono,#events td,.events-chunk td{
font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
h1{margin:0;font-size:22px}
h2{font-size:16px;margin:22px 0 8px}
.verdict{padding:14px 20px;border-left:8px solid}
.verdict.pass{background:#e8f5e9;border-color:#2e7d32}
.verdict.fail{background:#fdecea;border-color:#c62828}
.verdict.unknown{background:#f1f3f6;border-color:#78909c}.unknown .badge{background:#607d8b}
.description{margin:8px 0 0;max-width:70em}
.note{margin:8px 0 0;max-width:70em;font-weight:600}
.badge{display:inline-block;font-weight:700;letter-spacing:.06em;padding:2px 10px;
border-radius:4px;color:#fff;margin-right:10px;vertical-align:middle}
.pass .badge{background:#2e7d32}.fail .badge{background:#c62828}
.verdict h1{display:inline;vertical-align:middle}
.meta{margin:6px 0 0;color:var(--muted)}
.failures{margin:10px 0 0;padding-left:22px;white-space:pre-wrap}
.failures li{margin:2px 0}
.replay{display:flex;align-items:center;gap:8px;margin-top:10px}
.replay pre{margin:0;padding:6px 10px;background:#1b1f24;color:#e6edf3;border-radius:4px;
overflow-x:auto;flex:1 1 auto;white-space:pre-wrap;word-break:break-all}
button{font:inherit;font-size:12px;padding:2px 9px;border:1px solid var(--line);
border-radius:4px;background:#fff;cursor:pointer}
button[aria-pressed=true]{background:#1b1f24;color:#fff;border-color:#1b1f24}
.stats{border-collapse:collapse}
.stats th{text-align:left;font-weight:600;padding:3px 14px 3px 0;vertical-align:top}
.stats td{padding:3px 0}
.chip{display:inline-block;margin:1px 6px 1px 0;padding:0 7px;border-radius:9px;font-size:12px;
background:var(--c,#ddd);border:1px solid rgba(0,0,0,.15)}
.controls{display:flex;align-items:center;gap:6px;margin:6px 0;flex-wrap:wrap;font-size:12px}
.controls .sep{width:12px}.hint{color:var(--muted)}
.timeline{display:flex;border:1px solid var(--line);border-radius:4px;overflow:hidden}
.labels-col{flex:0 0 auto;border-right:1px solid var(--line);background:#fff}
.scroll{overflow-x:auto;flex:1 1 auto}
svg{display:block}
svg text{font:11px system-ui,sans-serif;fill:var(--fg)}
.labels .name{font-weight:600}.labels .counts{fill:var(--muted);font-size:10px}
.axis-title{fill:var(--muted)}
.lane-bg{fill:#fff}.lane-bg.odd{fill:var(--zebra)}
.grid{stroke:#e3e6ea;stroke-width:1}
.tick text{fill:var(--muted);font-size:10px}
.chart.scale-time .axis-order,.chart.scale-order .axis-time{display:none}
.region{fill:rgba(90,100,120,.08)}
.deploy{stroke:#7e57c2;stroke-width:1.5;stroke-dasharray:5 3}
.bar{fill:var(--c,#ccc);stroke:rgba(0,0,0,.35);stroke-width:.6}
.open .bar{stroke-dasharray:3 2;fill-opacity:.6}
.tail{stroke:var(--c,#999);stroke-width:2;stroke-dasharray:3 3}
.cap{fill:var(--c,#999);stroke:#333;stroke-width:.8}
.lbl{font:10px ui-monospace,Menlo,Consolas,monospace;fill:#111;pointer-events:none}
.mark path{fill:var(--c,#999);stroke:#333;stroke-width:.8}
.m-tick path,.m-cross path{fill:none;stroke:var(--d,#333);stroke-width:2}
.m-ring path,.m-fault-armed path{fill:#fff;stroke:var(--d,#333);stroke-width:1.6}
a.span:hover .bar,a.mark:hover path{stroke:#000;stroke-width:1.6}
.st-idle{--c:#b7c7d9;--d:#5f7a99}.st-deploy{--c:#c9b6f2;--d:#7e57c2}
.st-alarm-limit{--c:#f6c27f;--d:#c46f00}.st-explicit{--c:#8fd3c9;--d:#1f7a6e}
.st-crash{--c:#f29a9a;--d:#c62828}.st-destroyed{--c:#d8b9a3;--d:#8d5a3b}
.st-deleted{--c:#bdbdbd;--d:#555}.st-alive{--c:#a8dba8;--d:#2e7d32}
.st-done,.st-completed{--c:#8fd19e;--d:#2e7d32}
.st-failed,.st-error{--c:#f29a9a;--d:#c62828}
.st-killed,.st-recovery-failed{--c:#d9534f;--d:#8b0000}
.st-interrupted,.st-retry{--c:#f6c27f;--d:#c46f00}
.st-recovered{--c:#9cc8f0;--d:#1565c0}.st-skipped,.st-aborted{--c:#cfcfcf;--d:#616161}
.st-running{--c:#dce9f7;--d:#5f7a99}.st-given-up{--c:#444;--d:#000}
.st-fault{--c:#e53935;--d:#b71c1c}.st-warning{--c:#ffd54f;--d:#b28704}
.st-set{--c:#fff;--d:#37474f}.st-other{--c:#b0bec5;--d:#546e7a}
#events,.events-chunk{border-collapse:collapse;width:100%;font-size:12px}
#events th{position:sticky;top:0;background:#eef1f4;text-align:left;padding:4px 6px;
border-bottom:1px solid var(--line)}
#events td,.events-chunk td{padding:2px 6px;border-bottom:1px solid #eef0f2;vertical-align:top}
#events td.detail,.events-chunk td.detail{white-space:pre-wrap;word-break:break-word}
#events td.num,.events-chunk td.num{text-align:right;color:var(--muted)}
#events tr:target,#events tr.target,.events-chunk tr.target{background:#fff3bf;
outline:2px solid #f0b400}
#events[data-lazy],.events-chunk{table-layout:fixed}
.events-chunk{margin:0}.chunk{content-visibility:auto;contain-intrinsic-size:auto 100000px}
#events[data-lazy] th:nth-child(1),.events-chunk td:nth-child(1){width:5em}
#events[data-lazy] th:nth-child(2),.events-chunk td:nth-child(2){width:8em}
#events[data-lazy] th:nth-child(3),.events-chunk td:nth-child(3){width:16em}
#events[data-lazy] th:nth-child(4),.events-chunk td:nth-child(4){width:3em}
#events[data-lazy] th:nth-child(5),.events-chunk td:nth-child(5){width:16em}
#events tr.f-fault td.ev,#events tr.f-incarnation td.ev,.events-chunk tr.f-fault td.ev,
.events-chunk tr.f-incarnation td.ev{font-weight:600}
#filter{font:inherit;padding:3px 8px;width:min(480px,100%);border:1px solid var(--line);
border-radius:4px;margin-bottom:6px}
.legend{display:flex;flex-wrap:wrap;gap:4px 18px;font-size:12px;margin-top:8px}
.legend div{display:flex;align-items:center;gap:4px;flex-wrap:wrap}
.legend b{font-weight:600;margin-right:2px}
""".strip()

SCRIPT = """
"use strict";
(function () {
  var copy = document.getElementById("copy-replay");
  if (copy) copy.addEventListener("click", function () {
    var text = document.getElementById("replay").textContent;
    if (navigator.clipboard) navigator.clipboard.writeText(text).then(function () {
      copy.textContent = "copied";
    }, function () {});
  });
  var filter = document.getElementById("filter");
  if (filter) filter.addEventListener("input", function () {
    var q = filter.value.toLowerCase();
    var rows = document.querySelectorAll("#events tbody tr, .events-chunk tr");
    for (var i = 0; i < rows.length; i++) {
      rows[i].hidden = q !== "" && rows[i].textContent.toLowerCase().indexOf(q) < 0;
    }
  });
  // A long run's rows come as compact JSON (reports.html.STATIC_ROWS_MAX): built a chunk at
  // a time after load, and at once up to a record the chart or the address asks for.
  (function (data) {
    if (!data) return;
    var packed = JSON.parse(data.textContent), rows = packed.rows, next = 0;
    var list = document.getElementById("events"), holder = document.getElementById("events-more");
    var pad = function (n, w) { n = String(n); while (n.length < w) n = "0" + n; return n; };
    var clock = function (ms) {
      var sign = ms < 0 ? "-" : "", rest = Math.abs(ms), day = Math.floor(rest / 86400000);
      rest -= day * 86400000;
      var h = Math.floor(rest / 3600000); rest -= h * 3600000;
      var m = Math.floor(rest / 60000); rest -= m * 60000;
      var s = Math.floor(rest / 1000);
      var text = pad(h, 2) + ":" + pad(m, 2) + ":" + pad(s, 2) + "." + pad(rest - s * 1000, 3);
      return sign + (day ? day + "d" + text : text);
    };
    var esc = function (text) {
      return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
        .replace(/"/g, "&quot;");
    };
    var names = packed.agents.map(esc), events = packed.events.map(esc);
    var build = function (upto) {
      // Each chunk is a table of its own (fixed column widths line them up), written as one
      // string (much faster than a node at a time), laid out only when it comes into view.
      var html = [];
      for (; next < rows.length && next < upto; next++) {
        var r = rows[next], agent = packed.agents[r[2]];
        html.push('<tr id="e' + r[0] + '" class="f-' + packed.families[r[4]] + '">' +
          '<td class="num">' + r[0] + "</td><td>" + clock(r[1]) + "</td><td>" +
          (agent ? names[r[2]] : "(platform)") + "</td><td>" + (agent ? "#" + r[3] : "") +
          '</td><td class="ev">' + events[r[4]] + '</td><td class="detail">' + esc(r[5]) +
          "</td></tr>");
      }
      var part = document.createElement("div");
      part.className = "chunk";
      part.innerHTML = '<table class="events-chunk"><tbody>' + html.join("") + "</tbody></table>";
      var q = filter ? filter.value.toLowerCase() : "", built = part.querySelectorAll("tr");
      for (var i = 0; q && i < built.length; i++) {
        built[i].hidden = built[i].textContent.toLowerCase().indexOf(q) < 0;
      }
      holder.appendChild(part);
      list.setAttribute("data-built", String(next));
    };
    var marked = null;
    var reveal = function () {
      var m = /^#e([0-9]+)$/.exec(window.location.hash);
      if (!m) return;
      while (next < rows.length && !document.getElementById("e" + m[1])) build(next + 5000);
      var row = document.getElementById("e" + m[1]);
      if (!row) return;
      if (marked) marked.classList.remove("target");
      row.classList.add("target");
      marked = row;
      row.scrollIntoView({block: "center"});
    };
    // Yield between chunks through a message channel: timers are throttled in a tab that is
    // not in front, a posted message is not.
    var channel = new MessageChannel();
    var more = function () {
      build(next + 5000);
      if (next < rows.length) channel.port2.postMessage(0);
    };
    channel.port1.onmessage = more;
    build(2000);
    reveal();
    window.addEventListener("hashchange", reveal);
    channel.port2.postMessage(0);
  })(document.getElementById("events-data"));
  var chart = document.getElementById("chart");
  if (!chart) return;
  var base = +chart.getAttribute("data-base"), pad = +chart.getAttribute("data-pad");
  var end = +chart.getAttribute("data-end"), count = +chart.getAttribute("data-count");
  var scale = chart.getAttribute("data-scale"), zoom = 1;
  function num(v) { return v.toFixed(1); }
  function x(el, suffix) {
    var inner = base * zoom - 2 * pad;
    if (scale === "time") {
      var t = +el.getAttribute("data-t" + suffix);
      return pad + (end > 0 ? t / end : 0) * inner;
    }
    return pad + (+el.getAttribute("data-s" + suffix) + 0.5) / count * inner;
  }
  function each(selector, fn) {
    var list = chart.querySelectorAll(selector);
    for (var i = 0; i < list.length; i++) fn(list[i]);
  }
  function layout() {
    chart.setAttribute("width", base * zoom);
    chart.setAttribute("class", "chart scale-" + scale);
    each(".axis-" + scale + " .tick", function (g) {
      g.setAttribute("transform", "translate(" + num(x(g, "")) + ",0)");
    });
    each("rect.region", function (r) {
      var a = x(r, "0"), b = x(r, "1");
      r.setAttribute("x", num(a));
      r.setAttribute("width", num(Math.max(b - a, 1)));
    });
    each("line.deploy", function (l) {
      var a = num(x(l, ""));
      l.setAttribute("x1", a);
      l.setAttribute("x2", a);
    });
    each("a.span", function (g) {
      var a = x(g, "0"), b = Math.max(x(g, "1"), a + 2);
      var m = g.hasAttribute("data-tm") ? Math.max(x(g, "m"), a + 2) : b;
      var bar = g.querySelector(".bar");
      bar.setAttribute("x", num(a));
      bar.setAttribute("width", num(m - a));
      var tail = g.querySelector(".tail");
      if (tail) { tail.setAttribute("x1", num(m)); tail.setAttribute("x2", num(b)); }
      var cap = g.querySelector(".cap");
      if (cap) cap.setAttribute("cx", num(b));
      var lbl = g.querySelector(".lbl");
      if (lbl) {
        lbl.setAttribute("x", num(a + 3));
        var fits = m - a >= +lbl.getAttribute("data-w");
        lbl.setAttribute("visibility", fits ? "visible" : "hidden");
      }
    });
    each("a.mark", function (g) {
      var y = g.getAttribute("data-y");
      g.setAttribute("transform", "translate(" + num(x(g, "")) + "," + y + ")");
    });
    var level = document.getElementById("zoom-level");
    if (level) level.textContent = zoom + "\\u00d7";
    ["time", "order"].forEach(function (name) {
      var b = document.getElementById("scale-" + name);
      if (b) b.setAttribute("aria-pressed", String(scale === name));
    });
  }
  function on(id, fn) {
    var b = document.getElementById(id);
    if (b) b.addEventListener("click", function () { fn(); layout(); });
  }
  on("scale-time", function () { scale = "time"; });
  on("scale-order", function () { scale = "order"; });
  on("zoom-in", function () { zoom = Math.min(zoom * 2, 256); });
  on("zoom-out", function () { zoom = Math.max(zoom / 2, 1); });
  on("zoom-fit", function () { zoom = 1; });
  var view = /^#view=(time|order)(?:,([0-9]+))?$/.exec(window.location.hash);
  if (view) {
    scale = view[1];
    if (view[2]) zoom = Math.min(Math.max(+view[2], 1), 256);
    layout();
  }
  chart.setAttribute("data-ready", "1");
})();
""".strip()
