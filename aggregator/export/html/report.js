/* meridian HTML report: draws the data object of <script id="mrd-data"> (written by
 * aggregator/export/html_data.c; the layout is described there and in the export README).
 * Embedded into the page by the build; no external asset, nothing fetched.
 * Every number a reader sees is also kept exact (ns) in a data- attribute of its element,
 * which is what tests read back. */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("mrd-data").textContent);
  var COLORS = { compute: "#3a78c2", hidden: "#4caf50", exposed: "#d9534f", idle: "#d0d0d0",
                 nvtx: "#8e6bb8", comm: "#e8892b" };

  function fmtNs(v) {
    var a = Math.abs(v);
    if (a < 1e3) return v + " ns";
    if (a < 1e6) return (v / 1e3).toFixed(1) + " us";
    if (a < 1e9) return (v / 1e6).toFixed(2) + " ms";
    return (v / 1e9).toFixed(3) + " s";
  }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svgEl(tag, attrs) {
    var e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  function note(parent, text) { parent.appendChild(el("p", { "class": "note" }, text)); }

  /* A table whose columns sort on a click: cols = [{name, left}], rows = arrays of cells
   * {t: text, v: sort value, a: data- attributes}. */
  function table(parent, cols, rows, id) {
    var t = el("table", { "class": "sortable" });
    if (id) t.id = id;
    var hr = el("tr");
    cols.forEach(function (c) { hr.appendChild(el("th", c.left ? { "class": "l" } : null, c.name)); });
    t.appendChild(el("thead")).appendChild(hr);
    var body = t.appendChild(el("tbody"));
    rows.forEach(function (r) {
      var tr = body.appendChild(el("tr", r.attrs || null));
      r.cells.forEach(function (c, i) {
        var td = el("td", cols[i].left ? { "class": "l" } : null, c.t);
        td.setAttribute("data-v", c.v === undefined ? c.t : c.v);
        tr.appendChild(td);
      });
    });
    parent.appendChild(t);
    makeSortable(t);
    return t;
  }
  function makeSortable(t) {
    var ths = t.querySelectorAll("th");
    Array.prototype.forEach.call(ths, function (th, i) {
      th.addEventListener("click", function () {
        var desc = !th.classList.contains("desc");
        Array.prototype.forEach.call(ths, function (o) { o.classList.remove("asc", "desc"); });
        th.classList.add(desc ? "desc" : "asc");
        var body = t.tBodies[0] || t;
        var rows = Array.prototype.slice.call(body.querySelectorAll("tr")).filter(function (r) {
          return r.querySelector("td");
        });
        function key(r) {
          var td = r.children[i];
          var v = td ? (td.getAttribute("data-v") || td.textContent) : "";
          var n = parseFloat(v);
          return isNaN(n) || String(n) !== v.trim() ? v : n;
        }
        rows.sort(function (a, b) {
          var x = key(a), y = key(b);
          var c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
          return desc ? -c : c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }
  function ns(v) { return { t: fmtNs(v), v: v }; }
  function num(v) { return { t: String(v), v: v }; }

  /* ---- stragglers ---- */
  function stragglers() {
    var box = document.getElementById("stragglers");
    var late = D.ranking.filter(function (r) { return r[1] > 0; });
    if (late.length === 0) {
      box.appendChild(el("p", { id: "no-straggler" },
        "No straggler: no rank's late arrival made another rank wait."));
    } else {
      var ol = el("ol", { id: "straggler-list" });
      late.slice(0, 10).forEach(function (r) {
        ol.appendChild(el("li", { "data-rank": r[0], "data-caused-ns": r[1] },
          "rank " + r[0] + ": caused " + fmtNs(r[1]) + " of wait, last to arrive " + r[3] +
          " of " + r[4] + " times"));
      });
      box.appendChild(ol);
      if (late.length > 10) note(box, (late.length - 10) + " more ranks caused some wait (table).");
    }
    var wrap = box.appendChild(el("div", { "class": "scroll" }));
    table(wrap, [{ name: "order" }, { name: "rank" }, { name: "wait caused" },
                 { name: "times last" }, { name: "wait suffered" }, { name: "instances" }],
      D.ranking.map(function (r, i) {
        return { attrs: { "data-rank": r[0], "data-caused-ns": r[1], "data-suffered-ns": r[2],
                          "data-times-last": r[3] },
                 cells: [num(i + 1), num(r[0]), ns(r[1]), num(r[3]), ns(r[2]), num(r[4])] };
      }), "ranking");
  }

  /* ---- heat map ---- */
  function heatColor(v, max) {
    if (v <= 0 || max <= 0) return "#f2f2f2";
    var x = Math.sqrt(v / max);
    var r = 255, g = Math.round(235 - 200 * x), b = Math.round(200 - 190 * x);
    return "rgb(" + r + "," + g + "," + b + ")";
  }
  function heat() {
    var box = document.getElementById("heat"), H = D.heat;
    if (!H.collected) { note(box, "Not collected for this report."); return; }
    if (H.steps === 0 || H.rows.length === 0) { note(box, "No steps with matched collectives."); return; }
    var max = 0;
    H.rows.forEach(function (r) { for (var s = 1; s < r.length; s++) max = Math.max(max, r[s]); });
    H.other_max.forEach(function (v) { max = Math.max(max, v); });
    var t = el("table", { "class": "heat", id: "heat-table" });
    var hr = t.appendChild(el("tr"));
    hr.appendChild(el("th", null, "rank \\ step"));
    for (var s = 0; s < H.steps; s++) hr.appendChild(el("th", null, s % 10 === 0 ? String(D.steps[s][0]) : ""));
    function row(label, vals, attrs, rank) {
      var tr = t.appendChild(el("tr", attrs));
      tr.appendChild(el("th", null, label));
      vals.forEach(function (v, s) {
        var a = { "class": "hc", "data-step": D.steps[s][0], "data-delay-ns": v,
                  title: label + ", step " + D.steps[s][0] + ": " + fmtNs(v) };
        if (rank !== null) a["data-rank"] = rank;
        var td = el("td", a);
        td.style.background = heatColor(v, max);
        tr.appendChild(td);
      });
    }
    H.rows.forEach(function (r) { row("rank " + r[0], r.slice(1), { "data-rank": r[0] }, r[0]); });
    if (H.others > 0)
      row(H.others + " others (max)", H.other_max, { "class": "other", "data-others": H.others }, null);
    var wrap = box.appendChild(el("div", { "class": "scroll" }));
    wrap.appendChild(t);
    note(box, "Darkest = " + fmtNs(max) + ". " + (D.steps.length > H.steps ?
      "The first " + H.steps + " of " + D.steps.length + " steps are shown." : "") +
      (H.others > 0 ? " " + H.rows.length + " ranks shown one per row (the worst); the other " +
        H.others + " as their maximum." : ""));
  }

  /* ---- per-step stacked bars ---- */
  function bars() {
    var box = document.getElementById("bars");
    if (D.bars.length === 0) { note(box, "No steps with kernels."); return; }
    var nr = Math.max(1, D.ranking.length);
    var W = 1100, H = 220, left = 60, n = D.bars.length;
    var bw = Math.max(1, Math.min(40, (W - left - 10) / n));
    var max = 0;
    D.bars.forEach(function (b) { max = Math.max(max, (b[1] + b[2] + b[3] + b[4]) / nr); });
    var svg = svgEl("svg", { width: W, height: H + 30, id: "bars-svg" });
    var keys = ["compute", "hidden", "exposed", "idle"];
    D.bars.forEach(function (b, i) {
      var g = svgEl("g", { "class": "bar", "data-step": b[0], "data-compute-ns": b[1],
                           "data-hidden-ns": b[2], "data-exposed-ns": b[3], "data-idle-ns": b[4],
                           "data-ranks": nr });
      var y = H;
      var title = svgEl("title", {});
      title.textContent = "step " + b[0] + " (mean over " + nr + " ranks): compute only " +
        fmtNs(Math.round(b[1] / nr)) + ", hidden comm " + fmtNs(Math.round(b[2] / nr)) +
        ", exposed comm " + fmtNs(Math.round(b[3] / nr)) + ", idle " + fmtNs(Math.round(b[4] / nr));
      g.appendChild(title);
      keys.forEach(function (k, j) {
        var h = max > 0 ? (b[j + 1] / nr) / max * (H - 10) : 0;
        y -= h;
        g.appendChild(svgEl("rect", { x: left + i * bw, y: y, width: Math.max(0.5, bw - 1),
                                      height: h, fill: COLORS[k] }));
      });
      svg.appendChild(g);
    });
    for (var k = 0; k <= 4; k++) {
      var yy = H - (H - 10) * k / 4;
      svg.appendChild(svgEl("line", { x1: left - 4, x2: left, y1: yy, y2: yy, stroke: "#666" }));
      var tx = svgEl("text", { x: 2, y: yy + 4 });
      tx.textContent = fmtNs(Math.round(max * k / 4));
      svg.appendChild(tx);
    }
    var lab = svgEl("text", { x: left, y: H + 20 });
    lab.textContent = "steps " + D.bars[0][0] + " to " + D.bars[n - 1][0];
    svg.appendChild(lab);
    box.appendChild(svg);
    legend(box, [["compute", "compute only"], ["hidden", "communication hidden under compute"],
                 ["exposed", "exposed communication"], ["idle", "idle (no kernel)"]]);
  }
  function legend(box, items) {
    var p = box.appendChild(el("p", { "class": "legend" }));
    items.forEach(function (it) {
      var s = p.appendChild(el("span"));
      var i = s.appendChild(el("i"));
      i.style.background = COLORS[it[0]];
      s.appendChild(document.createTextNode(it[1]));
    });
  }

  /* ---- timelines: canvas, wheel zoom, drag pan ---- */
  var tip = null;
  function showTip(x, y, text) {
    if (!tip) { tip = el("div", { "class": "tip" }); document.body.appendChild(tip); }
    if (!text) { tip.style.display = "none"; return; }
    tip.textContent = text;
    tip.style.left = (x + 12) + "px";
    tip.style.top = (y + 12) + "px";
    tip.style.display = "block";
  }
  function timeline(box, T) {
    var LANE = 10, LEFT = 90, W = 1100;
    var lanes = [];
    T.ranks.forEach(function (r) {
      lanes.push({ label: "rank " + r.rank + " NVTX", kind: "nvtx", items: r.n, stride: 4 });
      lanes.push({ label: "rank " + r.rank + " compute", kind: "compute", items: r.k[0], stride: 3, more: r.more[0] });
      lanes.push({ label: "rank " + r.rank + " NCCL", kind: "comm", items: r.k[1], stride: 3, more: r.more[1] });
    });
    if (T.agg && T.agg.ranks > 0) {
      lanes.push({ label: T.agg.ranks + " others compute", kind: "compute", agg: T.agg.pm[0] });
      lanes.push({ label: T.agg.ranks + " others NCCL", kind: "comm", agg: T.agg.pm[1] });
    }
    var wrap = box.appendChild(el("div", { "class": "tl", "data-step": T.step,
                                            "data-ranks": T.ranks.length }));
    wrap.appendChild(el("h3", null, "Step " + T.step + " (" + T.why + "): " + fmtNs(T.len) +
      ", from " + fmtNs(T.at) + " after the time origin"));
    var cv = wrap.appendChild(el("canvas", { "class": "tl", width: W, height: lanes.length * LANE + 24 }));
    var ctx = cv.getContext("2d");
    var view = { t0: 0, t1: T.len };
    function x(t) { return LEFT + (t - view.t0) / (view.t1 - view.t0) * (W - LEFT - 4); }
    function draw() {
      ctx.clearRect(0, 0, cv.width, cv.height);
      ctx.font = "9px sans-serif";
      lanes.forEach(function (L, li) {
        var y = li * LANE;
        ctx.fillStyle = "#333";
        ctx.fillText(L.label, 2, y + 8);
        ctx.fillStyle = COLORS[L.kind];
        if (L.agg) {
          var bn = L.agg.length, bwid = T.len / bn;
          L.agg.forEach(function (pm, b) {
            if (pm <= 0) return;
            ctx.globalAlpha = Math.min(1, 0.15 + pm / 1000);
            var x0 = Math.max(LEFT, x(b * bwid)), x1 = Math.min(W, x((b + 1) * bwid));
            if (x1 > x0) ctx.fillRect(x0, y + 1, x1 - x0, LANE - 2);
          });
          ctx.globalAlpha = 1;
          return;
        }
        for (var i = 0; i < L.items.length; i += L.stride) {
          var s = L.items[i], e = L.items[i + 1];
          if (e < view.t0 || s > view.t1) continue;
          var d = L.kind === "nvtx" ? Math.min(3, L.items[i + 3]) : 0;
          var x0 = Math.max(LEFT, x(s)), x1 = Math.min(W, x(e));
          ctx.fillRect(x0, y + 1 + d * 2, Math.max(0.5, x1 - x0), LANE - 2 - d * 2);
        }
      });
      ctx.fillStyle = "#333";
      var ay = lanes.length * LANE + 14;
      for (var k = 0; k <= 4; k++) {
        var t = view.t0 + (view.t1 - view.t0) * k / 4;
        ctx.fillText("+" + fmtNs(Math.round(t)), Math.min(W - 60, x(t)), ay);
      }
    }
    function hit(ev) {
      var r = cv.getBoundingClientRect();
      var px = ev.clientX - r.left, py = ev.clientY - r.top;
      var L = lanes[Math.floor(py / LANE)];
      if (!L || px < LEFT) return null;
      var t = view.t0 + (px - LEFT) / (W - LEFT - 4) * (view.t1 - view.t0);
      if (L.agg) {
        var b = Math.floor(t / (T.len / L.agg.length));
        return b >= 0 && b < L.agg.length ? L.label + ": " + (L.agg[b] / 10).toFixed(1) + "% busy" : null;
      }
      var tol = (view.t1 - view.t0) / (W - LEFT) * 2;
      for (var i = 0; i < L.items.length; i += L.stride) {
        if (L.items[i] - tol <= t && t <= L.items[i + 1] + tol) {
          var nm = L.items[i + 2] >= 0 ? D.names[L.items[i + 2]] : "?";
          return L.label + ": " + nm + " (" + fmtNs(L.items[i + 1] - L.items[i]) + ")";
        }
      }
      return null;
    }
    var drag = null;
    cv.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var r = cv.getBoundingClientRect();
      var f = ev.deltaY > 0 ? 1.25 : 0.8;
      var t = view.t0 + (ev.clientX - r.left - LEFT) / (W - LEFT - 4) * (view.t1 - view.t0);
      var span = Math.max(1000, (view.t1 - view.t0) * f);
      view.t0 = t - (t - view.t0) * span / (view.t1 - view.t0);
      view.t1 = view.t0 + span;
      draw();
    }, { passive: false });
    cv.addEventListener("mousedown", function (ev) { drag = { x: ev.clientX, t0: view.t0, t1: view.t1 }; });
    window.addEventListener("mouseup", function () { drag = null; });
    cv.addEventListener("mousemove", function (ev) {
      if (drag) {
        var dt = (ev.clientX - drag.x) / (W - LEFT - 4) * (drag.t1 - drag.t0);
        view.t0 = drag.t0 - dt;
        view.t1 = drag.t1 - dt;
        draw();
        showTip(0, 0, null);
        return;
      }
      showTip(ev.clientX, ev.clientY, hit(ev));
    });
    cv.addEventListener("mouseleave", function () { showTip(0, 0, null); });
    cv.addEventListener("dblclick", function () { view.t0 = 0; view.t1 = T.len; draw(); });
    draw();
    var more = T.ranks.reduce(function (m, r) { return m + r.more[0] + r.more[1]; }, 0);
    if (more > 0) note(wrap, more + " kernels beyond " + D.bounds.tl_items + " per lane not drawn.");
  }
  function timelines() {
    var box = document.getElementById("timelines");
    if (D.timelines.length === 0) { note(box, "No steps with kernels and NVTX ranges to draw."); return; }
    legend(box, [["nvtx", "NVTX"], ["compute", "compute kernels"], ["comm", "NCCL kernels"]]);
    D.timelines.forEach(function (T) { timeline(box, T); });
    note(box, "Bounds: " + D.bounds.tl_ranks + " ranks drawn lane by lane, " + D.bounds.tl_items +
      " items per lane, the other ranks in " + D.bounds.tl_bins + " bins.");
  }

  /* ---- tables ---- */
  function steps() {
    var box = document.getElementById("steps");
    if (D.steps.length === 0) { note(box, "No NVTX step ranges."); return; }
    var wrap = box.appendChild(el("div", { "class": "scroll" }));
    table(wrap, [{ name: "step" }, { name: "at" }, { name: "duration" }, { name: "collectives" },
                 { name: "wait cost" }, { name: "max skew" }, { name: "worst rank" },
                 { name: "its wait caused" }, { name: "capture", left: true }],
      D.steps.map(function (s) {
        var cap = (s[8] & 1 ? "CUPTI attach " : "") + (s[8] & 2 ? "CUPTI detach" : "");
        return { attrs: { "data-step": s[0] },
                 cells: [num(s[0]), ns(s[1]), ns(s[2]), num(s[3]), ns(s[4]), ns(s[5]),
                         num(s[6]), ns(s[7]), { t: cap }] };
      }), "steps-table");
  }
  function colls() {
    var box = document.getElementById("colls");
    if (D.colls.length === 0) { note(box, "No matched collective."); return; }
    D.colls.forEach(function (c) {
      var lo = c.bins.findIndex(function (v) { return v > 0; });
      var hi = c.bins.length - 1;
      while (hi > lo && c.bins[hi] === 0) hi--;
      var max = Math.max.apply(null, c.bins), W = 520, H = 90, bw = Math.min(40, (W - 20) / (hi - lo + 1));
      var div = box.appendChild(el("div", { "class": "coll", "data-func": c.func, "data-n": c.n }));
      div.appendChild(el("h3", null, c.func + ": " + c.n + " instances"));
      var svg = svgEl("svg", { width: W, height: H + 20 });
      for (var b = lo; b <= hi; b++) {
        var h = c.bins[b] / max * (H - 10);
        var r = svgEl("rect", { x: 10 + (b - lo) * bw, y: H - h, width: bw - 2, height: h, fill: "#6a5acd" });
        var tt = svgEl("title", {});
        tt.textContent = c.bins[b] + " instances " + (b === 0 ? "< 1 us" : "in [" +
          fmtNs(1000 * Math.pow(2, b - 1)) + ", " + fmtNs(1000 * Math.pow(2, b)) + ")");
        r.appendChild(tt);
        svg.appendChild(r);
        if ((b - lo) % 2 === 0) {
          var tx = svgEl("text", { x: 10 + (b - lo) * bw, y: H + 14 });
          tx.textContent = "<" + fmtNs(1000 * Math.pow(2, b));
          svg.appendChild(tx);
        }
      }
      div.appendChild(svg);
    });
  }
  function kernels() {
    var box = document.getElementById("kernels");
    if (D.kernels.length === 0) { note(box, "No kernels recorded."); return; }
    var all = D.kernels.reduce(function (s, k) { return s + k[1]; }, 0);
    table(box, [{ name: "kernel", left: true }, { name: "total time" }, { name: "launches" },
                { name: "mean" }, { name: "share of these kernels' time" }],
      D.kernels.map(function (k) {
        return { attrs: { "data-total-ns": k[1] },
                 cells: [{ t: k[0] }, ns(k[1]), num(k[2]), ns(Math.round(k[1] / Math.max(1, k[2]))),
                         { t: (100 * k[1] / Math.max(1, all)).toFixed(1) + "%", v: k[1] }] };
      }), "kernels-table");
    note(box, "The top " + D.bounds.top_kernels + " kernel names by total time, all ranks together.");
  }
  function windows() {
    var box = document.getElementById("windows");
    if (D.windows.length === 0) {
      note(box, "No capture windows: every step was traced in full (or the database is not finalized).");
      return;
    }
    table(box, [{ name: "rank" }, { name: "windows" }, { name: "steps traced in full" },
                { name: "step ranges", left: true }, { name: "kernels" }, { name: "open at exit" }],
      D.windows.map(function (w) {
        var rg = w.ranges.map(function (r) { return r[0] === r[1] ? String(r[0]) : r[0] + "-" + r[1]; }).join(", ");
        if (w.windows > w.ranges.length) rg += ", ...";
        return { attrs: { "data-rank": w.rank },
                 cells: [num(w.rank), num(w.windows), num(w.steps), { t: rg }, num(w.kernels), num(w.open)] };
      }), "windows-table");
  }
  function ranks() {
    var box = document.getElementById("ranks");
    table(box, [{ name: "rank" }, { name: "host", left: true }, { name: "pid" },
                { name: "GPUs", left: true }, { name: "kernels" }, { name: "NCCL ops" },
                { name: "dropped" }, { name: "drop reasons", left: true },
                { name: "clock offset vs the first fitted rank" }, { name: "drift ppm" },
                { name: "error bound" }],
      D.ranks.map(function (r) {
        var clock = r[8] ? [ns(r[9]), { t: (r[10] >= 0 ? "+" : "") + r[10].toFixed(3), v: r[10] }, ns(r[11])]
                         : [{ t: "not fitted" }, { t: "" }, { t: "" }];
        return { attrs: { "data-rank": r[0] },
                 cells: [num(r[0]), { t: r[1] }, num(r[2]), { t: r[3] }, num(r[4]), num(r[5]),
                         num(r[6]), { t: r[7] }].concat(clock) };
      }), "ranks-table");
  }
  /* D.findings: the JSON report's "findings" (report_findings.c): fired first, by severity */
  function findings() {
    var box = document.getElementById("findings");
    var all = D.findings || [];
    var fired = all.filter(function (x) { return x.status === "fired"; });
    if (fired.length === 0) note(box, "No rule fired.");
    fired.forEach(function (x) {
      var ev = x.evidence;
      var div = box.appendChild(el("div", { "class": "finding sev-" + x.severity,
                                            "data-rule": x.rule, "data-status": x.status,
                                            "data-severity": x.severity,
                                            "data-ranks": ev.ranks.join(","),
                                            "data-steps": ev.steps.join(",") }));
      div.appendChild(el("h3", null, "[" + x.severity + "] " + x.name + ": " + x.title));
      var parts = [];
      if (ev.ranks.length) parts.push("ranks " + ev.ranks.join(", ") +
                                      (ev.ranks_total > ev.ranks.length ? " (+" + (ev.ranks_total - ev.ranks.length) + " more)" : ""));
      if (ev.steps.length) parts.push("steps " + ev.steps.join(", "));
      Object.keys(ev.numbers).forEach(function (k) {
        var v = ev.numbers[k];
        parts.push(k + " " + (/share/.test(k) ? (100 * v).toFixed(1) + "%" : /_ns$/.test(k) ? fmtNs(v) : String(v)));
      });
      div.appendChild(el("p", null, "Evidence: " + parts.join("; ") + ". " + ev.detail));
      div.appendChild(el("p", { "class": "advice" }, "Try: " + x.advice));
    });
    var rest = all.filter(function (x) { return x.status !== "fired"; });
    if (rest.length) {
      var ul = box.appendChild(el("ul", { "class": "rules-rest" }));
      rest.forEach(function (x) {
        ul.appendChild(el("li", { "data-rule": x.rule, "data-status": x.status },
                          x.name + ": " + x.status + " (" + x.note + ")"));
      });
    }
  }
  function toc() {
    var nav = document.getElementById("toc");
    Array.prototype.forEach.call(document.querySelectorAll("h2[id]"), function (h) {
      nav.appendChild(el("a", { href: "#" + h.id }, h.textContent));
    });
  }

  findings();
  stragglers();
  heat();
  bars();
  timelines();
  steps();
  colls();
  kernels();
  windows();
  ranks();
  toc();
  document.body.setAttribute("data-rendered", "1");
  /* ms from the start of navigation to the page drawn (the tests' render-time check) */
  document.body.setAttribute("data-render-ms", String(Math.round(performance.now())));
})();
