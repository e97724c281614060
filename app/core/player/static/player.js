// The loop player: every frame of one animation arrives once (Streamlit's render message,
// args.spec, built by app/core/player/frames.py: a forward or backward tile loop, one row's
// online softmax, decoding's merge, or spans in lanes); Play, pause, speed and stepping run here,
// in the browser, with no request to the server per frame. The step shown is written to the
// page's URL as it changes, and reported to the server (one rerun) only when Play stops or a
// step by hand settles. Self-contained: no library, nothing fetched.
(function () {
  "use strict";

  const BASE_RATE = 2;                                   // steps a second at 1×
  const SPEEDS = [0.25, 0.5, 1, 2, 4, 8, 32];
  const REPORT_AFTER_MS = 700;                           // a step by hand settles this long
  const URL_EVERY_MS = 250;                              // URL writes while playing, at most

  let spec = null, sig = null, n = 0;
  let idx = 0;            // the step shown (0-based)
  let t = 0;              // Play's position in steps (idx = floor(t))
  let playing = false, speed = 1, lastTick = 0, reported = 0, reportTimer = null;
  let urlWritten = 0, urlPending = false;
  let cursor = null;      // eased positions of what moves: {x, y, bar}
  let painted = -1;       // the step the cells show
  const el = {};

  // ---- Streamlit's component protocol (what streamlit-component-lib sends) -------------
  function send(type, data) {
    window.parent.postMessage(Object.assign({isStreamlitMessage: true, type: type}, data || {}),
                              "*");
  }
  function setHeight() {
    send("streamlit:setFrameHeight", {height: document.documentElement.scrollHeight});
  }
  window.addEventListener("message", function (ev) {
    const d = ev.data;
    if (d && d.type === "streamlit:render") onRender(d.args || {});
  });

  function onRender(args) {
    if (args.sig === sig) { setHeight(); return; }       // a rerun with the same frames
    spec = args.spec; sig = args.sig; n = spec.frames.length;
    // the step the player opens at without a link, which the URL leaves out (writeUrl)
    document.body.dataset.home = String((spec.url.home || 0) + spec.url.base);
    idx = clamp(args.start | 0); t = idx; reported = idx; playing = false; painted = -1;
    cursor = null;
    build();
    show(idx, false);
    setHeight();
  }

  function clamp(i) { return Math.max(0, Math.min(n - 1, i)); }

  // ---- the page's URL and the server ----------------------------------------------------
  function writeUrl(force) {
    const now = performance.now();
    if (!force && now - urlWritten < URL_EVERY_MS) { urlPending = true; return; }
    urlWritten = now; urlPending = false;
    try {                 // the frame is same-origin (Streamlit's sandbox allows it)
      const w = window.parent, u = new URL(w.location.href), v = idx + spec.url.base;
      if (v === (spec.url.home || 0) + spec.url.base) u.searchParams.delete(spec.url.name);
      else u.searchParams.set(spec.url.name, String(v));
      if (u.href !== w.location.href) w.history.replaceState(w.history.state, "", u.href);
    } catch (e) { /* a host that forbids it: the server writes the URL on report */ }
  }
  function report() {
    clearTimeout(reportTimer); reportTimer = null;
    if (idx === reported) return;
    reported = idx;
    send("streamlit:setComponentValue", {value: {step: idx, sig: sig}, dataType: "json"});
  }
  function reportSoon() {
    clearTimeout(reportTimer);
    reportTimer = setTimeout(report, REPORT_AFTER_MS);
  }

  // ---- controls ---------------------------------------------------------------------------
  function play(on) {
    if (on && idx >= n - 1) { idx = 0; t = 0; }
    playing = on; lastTick = performance.now();
    if (!on) { t = idx; writeUrl(true); report(); }
    el.play.textContent = on ? "❚❚ Pause" : "▶ Play";
    el.play.setAttribute("aria-pressed", on ? "true" : "false");
    document.body.dataset.playing = on ? "true" : "false";
    show(idx, false);
  }
  function goTo(i) {
    if (playing) play(false);
    t = clamp(i);
    show(t, true);
    writeUrl(true);
    reportSoon();
  }

  function button(text, title, onClick) {
    const b = document.createElement("button");
    b.textContent = text; b.title = title; b.addEventListener("click", onClick);
    return b;
  }

  function build() {
    document.body.innerHTML = "";
    document.body.dataset.kind = spec.kind;
    const css = document.body.style;          // the app's palette (app/core/style.py)
    css.setProperty("--pending", spec.colors.pending);
    css.setProperty("--done", spec.colors.done);
    css.setProperty("--now", spec.kind === "row" ? spec.colors.K_j : spec.colors.S_ij);
    const root = document.createElement("div");
    root.className = "player" + (spec.compact ? " compact" : "") + (spec.code ? "" : " wide");
    root.tabIndex = 0;
    const bar = document.createElement("div");
    bar.className = "controls";
    el.play = button("▶ Play", "Play or pause (space)", function () { play(!playing); });
    el.play.className = "play";
    bar.append(button("|◀", "first step (Home)", function () { goTo(0); }),
               button("◀", "one step back (←)", function () { goTo(idx - 1); }),
               el.play,
               button("▶", "one step forward (→)", function () { goTo(idx + 1); }),
               button("▶|", "last step (End)", function () { goTo(n - 1); }));
    el.speed = document.createElement("select");
    el.speed.title = "speed: " + BASE_RATE + " steps a second at 1×";
    SPEEDS.forEach(function (s) {
      const o = document.createElement("option");
      o.value = String(s); o.textContent = s + "×"; if (s === speed) o.selected = true;
      el.speed.append(o);
    });
    el.speed.addEventListener("change", function () { speed = Number(el.speed.value); });
    el.slider = document.createElement("input");
    el.slider.type = "range"; el.slider.min = "0"; el.slider.max = String(Math.max(n - 1, 0));
    el.slider.setAttribute("aria-label", spec.url.label || "step");
    el.slider.addEventListener("input", function () { goTo(Number(el.slider.value)); });
    el.count = document.createElement("span");
    el.count.className = "count";
    bar.append(el.speed, el.slider, el.count);

    el.caption = document.createElement("div");
    el.caption.className = "caption";
    const stage = document.createElement("div");
    stage.className = "stage";
    el.board = document.createElement("div");
    el.board.className = "board";
    el.board.innerHTML = BOARDS[spec.kind]();
    stage.append(el.board);
    if (spec.code) stage.append(codePanel());
    root.append(bar, el.caption, stage);
    document.body.append(root);
    root.addEventListener("keydown", keys);
    document.addEventListener("keydown", keys);
    el.svg = el.board.querySelector("svg");
    el.cells = [...el.board.querySelectorAll("[data-step]")];
    el.byStep = [];
    el.cells.forEach(function (c) { el.byStep[Number(c.dataset.step)] = c; });
    ["cursor", "rowband", "colband", "qlit", "olit", "klit", "vlit", "hbm", "hbmtext",
     "mline", "mdot", "readout", "alpha", "dolit", "mrule", "mtext", "tcursor"
    ].forEach(function (id) {
      el[id] = el.board.querySelector("#" + id);
    });
    ["kcol", "vcol", "dkcol", "dvcol", "dqrow", "mpoint", "mbar", "span", "held"
    ].forEach(function (cls) {
      el[cls] = [...el.board.querySelectorAll("." + cls)];
    });
    bwCol = -1; bwRows = -1; spanState = [];
  }

  function keys(ev) {
    if (ev.target && ev.target.tagName === "SELECT") return;
    const k = ev.key;
    if (k === "ArrowRight") goTo(idx + 1);
    else if (k === "ArrowLeft") goTo(idx - 1);
    else if (k === "Home") goTo(0);
    else if (k === "End") goTo(n - 1);
    else if (k === " ") play(!playing);
    else return;
    ev.preventDefault(); ev.stopPropagation();
  }

  // ---- the tile loop's board (kind "loop") -------------------------------------------------
  function geometry() {
    const R = spec.rows, C = spec.cols, s = Math.max(1, 0.07 * Math.max(R, C));
    return {R: R, C: C, s: s, x0: -2.2 * s, x1: C + 1.6 * s, y0: -3.4 * s, y1: R + 1.0 * s,
            qx: -1.6 * s, ox: C + 0.4 * s, ky: -3.2 * s, vy: -1.9 * s};
  }

  function rect(x, y, w, h, attrs) {
    return '<rect x="' + x + '" y="' + y + '" width="' + w + '" height="' + h + '" ' +
      (attrs || "") + "/>";
  }
  function text(x, y, s, attrs) {
    return '<text x="' + x + '" y="' + y + '" ' + (attrs || "") + ">" + esc(s) + "</text>";
  }
  function esc(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;");
  }

  function loopSvg() {
    const g = geometry(), c = spec.colors, parts = [];
    const stroke = Math.max(g.R, g.C) > 32 ? "" : ' stroke="#BBBBBB" stroke-width="0.03"';
    for (let r = 0; r < g.R; r++) {
      for (let k = 0; k < g.C; k++) {
        const step = spec.cells[r * g.C + k];
        parts.push(rect(k, r, 1, 1, (step < 0 ? 'class="cell skipped"'
          : 'class="cell todo" data-step="' + step + '"') + stroke));
      }
    }
    const strip = function (id, x, y, w, h, color) {
      return rect(x, y, w, h, 'fill="' + c.pending + '"') +
        rect(x, y, id === "qlit" || id === "olit" ? g.s : 1, id === "qlit" || id === "olit"
             ? 1 : g.s, 'id="' + id + '" fill="' + color + '"');
    };
    parts.push(strip("qlit", g.qx, 0, g.s, g.R, c.Q_i), strip("olit", g.ox, 0, g.s, g.R, c.O_i),
               strip("klit", 0, g.ky, g.C, g.s, c.K_j), strip("vlit", 0, g.vy, g.C, g.s, c.V_j));
    const fs = 0.42 * g.s;
    const label = function (x, y, s, color) {
      return text(x, y, s, 'font-size="' + fs + '" font-weight="bold" fill="' + color +
                  '" text-anchor="middle" dominant-baseline="middle"');
    };
    parts.push(label(g.qx + g.s / 2, -0.5 * g.s, "Q_i", c.Q_i),
               label(g.ox + g.s / 2, -0.5 * g.s, "O_i", c.O_i),
               label(-1.1 * g.s, g.ky + g.s / 2, "K_j", c.K_j),
               label(-1.1 * g.s, g.vy + g.s / 2, "V_j", c.V_j));
    parts.push(rect(0, 0, g.C, 1, 'id="rowband" fill="none" stroke="' + c.Q_i +
                    '" stroke-width="' + 0.09 * g.s + '"'),
               rect(0, 0, 1, g.R, 'id="colband" fill="none" stroke="' + c.K_j +
                    '" stroke-width="' + 0.09 * g.s + '"'),
               rect(0, 0, 1, 1, 'id="cursor" fill="' + c.S_ij + '"'));
    const by = g.R + 0.4 * g.s, bh = 0.5 * g.s;          // the HBM bar under the grid
    parts.push(rect(0, by, g.C, bh, 'fill="' + c.pending + '"'),
               rect(0, by, 0, bh, 'id="hbm" fill="' + c.Q_i + '"'));
    return '<svg viewBox="' + [g.x0, g.y0, g.x1 - g.x0, g.y1 - g.y0].join(" ") +
      '" preserveAspectRatio="xMinYMin meet" role="img" aria-label="the loop over tiles">' +
      parts.join("") + "</svg>";
  }

  function bytes(b) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let u = 0;
    while (b >= 1024 && u < units.length - 1) { b /= 1024; u++; }
    return (u ? b.toFixed(1) : String(Math.round(b))) + " " + units[u];
  }

  function paintCells(step) {
    // cells change state only between the step they showed and this one
    const lo = painted < 0 ? 0 : Math.min(painted, step), hi = painted < 0 ? n - 1
      : Math.max(painted, step);
    for (let s = lo; s <= hi; s++) {
      const cell = el.byStep[s];
      if (cell) cell.setAttribute("class", "cell " + (s < step ? "done" : s === step ? "now"
                                                                        : "todo"));
    }
    painted = step;
  }

  function drawLoop(pos, frac) {
    const f = spec.frames[idx], g = geometry();
    paintCells(idx);
    const prev = spec.frames[Math.max(idx - 1, 0)];
    const total = f.read + f.written, before = prev.read + prev.written;
    const target = {x: f.col, y: f.row, bar: idx === 0 ? total : before + (total - before) *
                    Math.min(1, frac * 1.5)};
    ease(target);
    set(el.cursor, {x: cursor.x, y: cursor.y});
    el.cursor.setAttribute("opacity", String(0.55 + 0.45 * Math.min(1, frac * 3 + (playing ? 0
                                                                                  : 1))));
    set(el.rowband, {y: cursor.y}); set(el.colband, {x: cursor.x});
    set(el.qlit, {y: cursor.y}); set(el.olit, {y: cursor.y});
    set(el.klit, {x: cursor.x}); set(el.vlit, {x: cursor.x});
    const scale = Math.max(spec.naive, spec.frames[n - 1].read + spec.frames[n - 1].written, 1);
    el.hbm.setAttribute("width", String(g.C * cursor.bar / scale));
    el.hbmtext.textContent = "HBM so far: " + bytes(cursor.bar) + " (naive moves " +
      bytes(spec.naive) + ")";
  }

  function set(node, attrs) {
    if (!node) return;
    for (const k in attrs) node.setAttribute(k, String(Math.round(attrs[k] * 1000) / 1000));
  }

  // Motion between steps: what moves eases toward its place in a fixed time, whatever the
  // speed, so a step by hand glides too.
  let lastEase = 0;
  function ease(target) {
    const now = performance.now();
    if (!cursor) { cursor = Object.assign({}, target); lastEase = now; return; }
    const k = 1 - Math.exp(-(now - lastEase) / 70);
    lastEase = now;
    for (const key in target) {
      cursor[key] += (target[key] - cursor[key]) * k;
      if (Math.abs(target[key] - cursor[key]) < 1e-3 * Math.max(1, Math.abs(target[key])))
        cursor[key] = target[key];
    }
  }

  // ---- one query row's online softmax (kind "row") -------------------------------------------
  function rowRange() {
    const vals = [];
    spec.frames.forEach(function (f) {
      [f.tile_max, f.running_max].forEach(function (v) { if (v !== null) vals.push(v); });
    });
    let lo = Math.min.apply(null, vals.length ? vals : [0]);
    let hi = Math.max.apply(null, vals.length ? vals : [1]);
    if (hi - lo < 1e-9) { lo -= 1; hi += 1; }
    return {lo: lo, hi: hi};
  }

  const ROW = {w: 100, strip: 8, plot: 34, alpha: 12, gap: 5};
  function rowY(v) {
    const r = rowRange(), top = ROW.strip + ROW.gap;
    return top + ROW.plot * (1 - (v - r.lo) / (r.hi - r.lo));
  }

  function rowSvg() {
    const c = spec.colors, Tc = n, w = ROW.w / Tc, parts = [];
    const top = ROW.strip + ROW.gap, aTop = top + ROW.plot + ROW.gap + 4;
    parts.push(text(0, -1.5, "key tiles K_j", 'font-size="3" fill="' + c.K_j + '"'));
    spec.frames.forEach(function (f, j) {
      parts.push(rect(j * w, 0, w, ROW.strip, (f.processed ? 'class="cell todo" data-step="' +
        j + '"' : 'class="cell skipped"') + ' stroke="#BBBBBB" stroke-width="0.2"'));
    });
    parts.push(rect(0, 0, w, ROW.strip, 'id="cursor" fill="' + c.K_j + '"'));
    parts.push(rect(0, top, ROW.w, ROW.plot, 'fill="none" stroke="#DDDDDD" stroke-width="0.2"'));
    parts.push(text(0, top - 1, "running max m_i (line), tile max (dots)",
                    'font-size="2.6" fill="' + c.ink + '"'));
    spec.frames.forEach(function (f, j) {
      if (f.tile_max !== null)
        parts.push('<circle class="tmax" data-j="' + j + '" cx="' + (j + 0.5) * w + '" cy="' +
                   rowY(f.tile_max) + '" r="0.9" fill="' + c.S_ij + '"/>');
    });
    parts.push('<polyline id="mline" fill="none" stroke="' + c.m_i + '" stroke-width="0.6"/>');
    parts.push('<circle id="mdot" r="1.3" fill="' + c.m_i + '"/>');
    parts.push(text(0, aTop - 1, "rescale α = exp(m_old − m_new), red when below 1",
                    'font-size="2.6" fill="' + c.ink + '"'));
    spec.frames.forEach(function (f, j) {
      const a = f.rescale === null ? 1 : f.rescale;
      parts.push(rect(j * w + w * 0.15, aTop + ROW.alpha * (1 - a), w * 0.7, ROW.alpha * a,
        'class="abar" data-j="' + j + '" fill="' + (a < 1 ? c.alarm : c.done) + '"'));
    });
    const h = aTop + ROW.alpha + 1;
    return '<svg viewBox="-1 -5 ' + (ROW.w + 2) + " " + (h + 5) +
      '" preserveAspectRatio="xMinYMin meet" role="img" aria-label="one row of online softmax">'
      + parts.join("") + "</svg>";
  }

  function fmt(v) { return v === null ? "−∞" : Math.abs(v) >= 1e4 || (v !== 0 &&
    Math.abs(v) < 1e-3) ? v.toExponential(2) : v.toFixed(3); }

  function drawRow(pos, frac) {
    const w = ROW.w / n, f = spec.frames[idx];
    paintCells(idx);
    ease({x: idx * w, y: 0});
    set(el.cursor, {x: cursor.x});
    el.cursor.setAttribute("opacity", f.processed ? "1" : "0.3");
    const pts = [];
    for (let j = 0; j <= idx; j++) {
      const m = spec.frames[j].running_max;
      if (m !== null) pts.push([(j + 0.5) * w, rowY(m)]);
    }
    // the line grows into the current tile as the step runs
    if (pts.length > 1 && playing) {
      const a = pts[pts.length - 2], b = pts[pts.length - 1], k = Math.min(1, frac * 2);
      pts[pts.length - 1] = [a[0] + (b[0] - a[0]) * k, a[1] + (b[1] - a[1]) * k];
    }
    el.mline.setAttribute("points", pts.map(function (p) { return p.join(","); }).join(" "));
    if (pts.length) set(el.mdot, {cx: pts[pts.length - 1][0], cy: pts[pts.length - 1][1]});
    el.board.querySelectorAll(".tmax, .abar").forEach(function (node) {
      node.setAttribute("opacity", Number(node.dataset.j) <= idx ? "1" : "0.25");
    });
    const a = f.rescale;
    el.readout.textContent = f.processed ? "after K_" + f.tile + " (keys " + f.k0 + "–" +
      (f.k1 - 1) + "):  m_i = " + fmt(f.running_max) + "   l_i = " + fmt(f.running_sum) +
      "   α = " + fmt(a) + (a !== null && a < 1 ? "  (the max moved)" : "")
      : "K_" + f.tile + ": skipped by the causal mask (the state carries over)";
    el.readout.style.color = a !== null && a < 1 ? spec.colors.alarm : spec.colors.ink;
  }

  // ---- the backward loop's board (kind "backward"): key tiles outer --------------------------
  // K_j, V_j stay on chip for a whole column while Q_i and dO_i stream past; dK_j and dV_j fill
  // up on chip and go to HBM when the column ends; dQ_i grows in HBM, a part from every column.
  function bwGeometry() {
    const R = spec.rows, C = spec.cols, s = Math.max(1, 0.07 * Math.max(R, C));
    return {R: R, C: C, s: s, x0: -2.8 * s, x1: C + 1.6 * s, y0: -3.4 * s, y1: R + 2.8 * s,
            qx: -2.6 * s, dox: -1.4 * s, ky: -3.2 * s, vy: -1.9 * s, dqx: C + 0.4 * s,
            dky: R + 0.4 * s, dvy: R + 1.6 * s};
  }

  function backwardSvg() {
    const g = bwGeometry(), c = spec.colors, parts = [];
    const stroke = Math.max(g.R, g.C) > 32 ? "" : ' stroke="#BBBBBB" stroke-width="0.03"';
    for (let r = 0; r < g.R; r++) {
      for (let k = 0; k < g.C; k++) {
        const step = spec.cells[r * g.C + k];
        parts.push(rect(k, r, 1, 1, (step < 0 ? 'class="cell skipped"'
          : 'class="cell todo" data-step="' + step + '"') + stroke));
      }
    }
    // Q_i and dO_i stream past (a strip each, lit at the query tile on chip)
    parts.push(rect(g.qx, 0, g.s, g.R, 'fill="' + c.pending + '"'),
               rect(g.qx, 0, g.s, 1, 'id="qlit" fill="' + c.Q_i + '"'),
               rect(g.dox, 0, g.s, g.R, 'fill="' + c.pending + '"'),
               rect(g.dox, 0, g.s, 1, 'id="dolit" fill="' + c.O_i + '"'));
    // per key tile: K_j, V_j above the grid, dK_j, dV_j below it; per query tile: dQ_i
    for (let k = 0; k < g.C; k++) {
      parts.push(rect(k, g.ky, 1, g.s, 'class="kcol" fill="' + c.pending + '"' + stroke),
                 rect(k, g.vy, 1, g.s, 'class="vcol" fill="' + c.pending + '"' + stroke),
                 rect(k, g.dky, 1, g.s, 'class="dkcol" fill="' + c.pending + '"' + stroke),
                 rect(k, g.dvy, 1, g.s, 'class="dvcol" fill="' + c.pending + '"' + stroke));
    }
    parts.push(rect(g.dqx, 0, g.s, g.R, 'fill="' + c.pending + '"'));
    for (let r = 0; r < g.R; r++)
      parts.push(rect(g.dqx, r, g.s, 1, 'class="dqrow" fill="' + c.Q_i + '" opacity="0"'));
    const fs = 0.42 * g.s;
    const label = function (x, y, s, color) {
      return text(x, y, s, 'font-size="' + fs + '" font-weight="bold" fill="' + color +
                  '" text-anchor="middle" dominant-baseline="middle"');
    };
    parts.push(label(g.qx + g.s / 2, -0.5 * g.s, "Q_i", c.Q_i),
               label(g.dox + g.s / 2, -0.5 * g.s, "dO_i", c.O_i),
               label(-1.3 * g.s, g.ky + g.s / 2, "K_j", c.K_j),
               label(-1.3 * g.s, g.vy + g.s / 2, "V_j", c.V_j),
               label(g.dqx + g.s / 2, -0.5 * g.s, "dQ_i", c.Q_i),
               label(-1.3 * g.s, g.dky + g.s / 2, "dK_j", c.K_j),
               label(-1.3 * g.s, g.dvy + g.s / 2, "dV_j", c.V_j));
    parts.push(rect(0, 0, 1, g.R, 'id="colband" fill="none" stroke="' + c.K_j +
                    '" stroke-width="' + 0.12 * g.s + '"'),
               rect(0, 0, 1, 1, 'id="cursor" fill="' + c.S_ij + '"'));
    return '<svg viewBox="' + [g.x0, g.y0, g.x1 - g.x0, g.y1 - g.y0].join(" ") +
      '" preserveAspectRatio="xMinYMin meet" role="img" aria-label="the backward loop">' +
      parts.join("") + '</svg><div id="readout" class="note"></div>';
  }

  let bwCol = -1, bwRows = -1, bwLatest = [];
  function pct(v) { return Math.round(100 * (v || 0)) + "%"; }

  function drawBackward(pos, frac) {
    const f = spec.frames[idx], c = spec.colors;
    const prev = idx > 0 ? spec.frames[idx - 1] : null;
    const grow = playing ? Math.min(1, frac * 1.5) : 1;      // what this step adds, growing
    paintCells(idx);
    ease({x: f.col, y: f.row});
    set(el.cursor, {x: cursor.x, y: cursor.y});
    el.cursor.setAttribute("opacity", String(0.55 + 0.45 * Math.min(1, frac * 3 + (playing ? 0
                                                                                  : 1))));
    set(el.colband, {x: cursor.x}); set(el.qlit, {y: cursor.y}); set(el.dolit, {y: cursor.y});
    if (f.col !== bwCol) {          // the key tile on chip changed: colour every column
      bwCol = f.col;
      for (let k = 0; k < spec.cols; k++) {
        const state = k < f.col ? c.done : k === f.col ? null : c.pending;
        el.kcol[k].setAttribute("fill", state || c.K_j);
        el.vcol[k].setAttribute("fill", state || c.V_j);
        el.dkcol[k].setAttribute("fill", state || c.K_j);
        el.dvcol[k].setAttribute("fill", state || c.V_j);
        el.dkcol[k].setAttribute("opacity", "1"); el.dvcol[k].setAttribute("opacity", "1");
      }
    }
    const fresh = !prev || prev.col !== f.col;           // dK_j, dV_j start from 0
    const dk = (fresh ? 0 : prev.dk || 0) + ((f.dk || 0) - (fresh ? 0 : prev.dk || 0)) * grow;
    const dv = (fresh ? 0 : prev.dv || 0) + ((f.dv || 0) - (fresh ? 0 : prev.dv || 0)) * grow;
    el.dkcol[f.col].setAttribute("opacity", String(0.12 + 0.88 * dk));
    el.dvcol[f.col].setAttribute("opacity", String(0.12 + 0.88 * dv));
    if (bwRows !== idx) {           // dQ_i of every query tile after the steps so far
      bwRows = idx;
      bwLatest = new Array(spec.rows).fill(null);
      for (let s = 0; s < idx; s++) bwLatest[spec.frames[s].row] = spec.frames[s].dq || 0;
      el.dqrow.forEach(function (node, r) {
        node.setAttribute("opacity", bwLatest[r] === null ? "0" : String(0.12 + 0.88 *
                                                                         bwLatest[r]));
      });
    }
    const before = bwLatest[f.row] === null ? 0 : bwLatest[f.row];
    el.dqrow[f.row].setAttribute("opacity", String(0.12 + 0.88 * (before + ((f.dq || 0) -
                                                                             before) * grow)));
    el.readout.textContent = "P_ij rebuilt from lse_i: its rows sum to " +
      (f.p_mass === null ? "–" : f.p_mass.toFixed(3)) + " on average.  After this step dQ_i " +
      "holds " + pct(f.dq) + ", dK_j " + pct(f.dk) + ", dV_j " + pct(f.dv) +
      " of its final norm.";
  }

  // ---- decoding's merge (kind "merge"): one split merged a step ---------------------------
  const MERGE = {w: 700, h: 300, left: 54, mid: 372, right: 690, top: 44, bottom: 262};
  function mergeRange() {
    const vals = spec.frames.filter(function (f) { return f.seen && f.m_s !== null; })
      .map(function (f) { return f.m_s; });
    let lo = vals.length ? Math.min.apply(null, vals) : 0;
    let hi = vals.length ? Math.max.apply(null, vals) : 1;
    if (hi - lo < 1e-9) { lo -= 1; hi += 1; }
    const pad = 0.08 * (hi - lo);
    const top = Math.max.apply(null, spec.frames.map(function (f) {
      return f.seen && f.l_s ? f.l_s : 0; }).concat([1e-30]));
    return {lo: lo - pad, hi: hi + pad, top: top};
  }
  function mergeX(s, right) {
    const x0 = right ? MERGE.mid + 36 : MERGE.left, x1 = right ? MERGE.right : MERGE.mid - 18;
    return x0 + (s + 0.5) * (x1 - x0) / n;
  }
  function mergeY(v) {
    const r = mergeRange();
    return MERGE.bottom - (v - r.lo) / (r.hi - r.lo) * (MERGE.bottom - MERGE.top);
  }
  function barH(v) { return v / mergeRange().top * (MERGE.bottom - MERGE.top); }

  function mergeSvg() {
    const c = spec.colors, parts = [], r = mergeRange();
    const every = Math.max(1, Math.ceil(n / 16));
    const small = 'font-size="13" fill="' + c.ink + '"';
    parts.push(text(MERGE.left, 16, "Max m_s; red: the running max m",
                    'font-size="15" font-weight="bold" fill="' + c.ink + '"'),
               text(MERGE.mid + 36, 16, "exp(m_s − m)·l_s, summing to l",
                    'font-size="15" font-weight="bold" fill="' + c.ink + '"'));
    [[MERGE.left, MERGE.mid - 18], [MERGE.mid + 36, MERGE.right]].forEach(function (p) {
      parts.push(rect(p[0], MERGE.top, p[1] - p[0], MERGE.bottom - MERGE.top,
                      'fill="none" stroke="#DDDDDD" stroke-width="1"'));
    });
    [r.lo, (r.lo + r.hi) / 2, r.hi].forEach(function (v) {
      parts.push(text(MERGE.left - 6, mergeY(v) + 4, fmt(v), small + ' text-anchor="end"'));
    });
    parts.push(text(MERGE.mid + 30, MERGE.top + 4, fmt(r.top), small + ' text-anchor="end"'),
               text(MERGE.mid + 30, MERGE.bottom + 4, "0", small + ' text-anchor="end"'));
    spec.frames.forEach(function (f, s) {
      if (s % every === 0) {
        parts.push(text(mergeX(s, false), MERGE.bottom + 16, String(s), small +
                        ' text-anchor="middle"'),
                   text(mergeX(s, true), MERGE.bottom + 16, String(s), small +
                        ' text-anchor="middle"'));
      }
      const w = Math.max(2, 0.7 * (MERGE.right - MERGE.mid - 36) / n);
      parts.push('<circle class="mpoint" cx="' + mergeX(s, false) + '" cy="' + mergeY(f.m_s === null ? r.lo : f.m_s) +
                 '" r="' + Math.max(2.5, Math.min(7, 130 / n)) + '" stroke="#9E9E9E" ' +
                 'stroke-width="1"><title>' + esc("split " + s + ": m_s = " + fmt(f.m_s) +
                 ", l_s = " + fmt(f.l_s) + (f.seen ? "" : " (not seen by this row)")) +
                 "</title></circle>",
                 rect(mergeX(s, true) - w / 2, MERGE.bottom, w, 0, 'class="mbar" fill="' +
                      c.l_i + '"'));
    });
    parts.push(text((MERGE.left + MERGE.mid - 18) / 2, MERGE.bottom + 32, "split s", small +
                    ' text-anchor="middle"'),
               text((MERGE.mid + 36 + MERGE.right) / 2, MERGE.bottom + 32, "split s", small +
                    ' text-anchor="middle"'),
               '<line id="mrule" x1="' + MERGE.left + '" x2="' + (MERGE.mid - 18) + '" y1="' +
               MERGE.bottom + '" y2="' + MERGE.bottom + '" stroke="' + c.alarm +
               '" stroke-width="3"/>',
               text(MERGE.mid + 42, MERGE.top + 16, "", 'id="mtext" ' + small));
    return '<svg viewBox="0 0 ' + MERGE.w + " " + MERGE.h + '" preserveAspectRatio="xMinYMin ' +
      'meet" role="img" aria-label="the merge of the splits">' + parts.join("") +
      '</svg><div id="readout" class="note"></div>';
  }

  function drawMerge(pos, frac) {
    const f = spec.frames[idx], c = spec.colors;
    const grow = playing ? Math.min(1, frac * 1.5) : 1;
    const target = {m: f.m_run === null ? mergeRange().lo : f.m_run};
    spec.frames.forEach(function (g, s) {
      const part = s <= idx && g.seen && f.m_run !== null ? Math.exp(g.m_s - f.m_run) * g.l_s
        : 0;
      target["b" + s] = s === idx ? part * grow : part;
    });
    ease(target);
    el.mpoint.forEach(function (node, s) {
      const g = spec.frames[s];
      node.setAttribute("fill", s > idx ? c.pending : g.seen ? c.S_ij : "#FFFFFF");
      node.setAttribute("opacity", s === idx && playing ? String(0.3 + 0.7 * grow) : "1");
    });
    el.mbar.forEach(function (node, s) {
      const h = barH(Math.max(0, cursor["b" + s]));
      node.setAttribute("y", String(MERGE.bottom - h)); node.setAttribute("height", String(h));
    });
    const y = mergeY(cursor.m);
    el.mrule.setAttribute("y1", String(y)); el.mrule.setAttribute("y2", String(y));
    el.mrule.setAttribute("opacity", f.m_run === null ? "0" : "1");
    el.mtext.textContent = "merged " + (idx + 1) + " of " + n + ": m = " + fmt(f.m_run) +
      ", l = " + fmt(f.l_run);
    const moved = idx > 0 && f.seen && spec.frames[idx - 1].m_run !== null &&
      f.m_run > spec.frames[idx - 1].m_run;
    el.readout.textContent = moved ? "Split " + idx + "'s max is above the running max: the " +
      "sums merged so far shrink by exp(m_old − m_new) = " +
      fmt(Math.exp(spec.frames[idx - 1].m_run - f.m_run)) + "."
      : f.seen ? "The running max stays: split " + idx + "'s sum is added, rescaled by " +
      "exp(m_s − m) = " + fmt(f.m_run === null ? null : Math.exp(f.m_s - f.m_run)) + "."
      : "This row sees none of split " + idx + "'s keys: nothing to add.";
    el.readout.style.color = moved ? c.alarm : c.ink;
  }

  // ---- spans in lanes over time (kind "lanes"): the Hopper pipeline's model ------------------
  const LANES = {label: 178, plot: 540, row: 24, bar: 14, top: 8};
  function laneX(t) { return LANES.label + t / Math.max(spec.end, 1e-9) * LANES.plot; }
  function niceStep(span) {
    const raw = span / 8, p = Math.pow(10, Math.floor(Math.log10(raw)));
    return [1, 2, 5, 10].map(function (m) { return m * p; }).find(function (v) {
      return v >= raw; });
  }

  function lanesSvg() {
    const parts = [], c = spec.colors, L = spec.lanes.length;
    const h = LANES.top + L * LANES.row, small = 'font-size="12" fill="' + c.ink + '"';
    spec.lanes.forEach(function (name, k) {
      const y = LANES.top + k * LANES.row;
      parts.push(rect(LANES.label, y, LANES.plot, LANES.row, 'fill="' + (k % 2 ? "#FFFFFF"
                                                                            : "#F7F7F7") + '"'),
                 text(LANES.label - 6, y + LANES.row / 2 + 4, name, small +
                      ' text-anchor="end"'));
    });
    spec.spans.forEach(function (sp) {
      const y = LANES.top + sp.lane * LANES.row + (LANES.row - LANES.bar) / 2;
      parts.push(rect(laneX(sp.start), y, Math.max(0.5, laneX(sp.end) - laneX(sp.start)),
                      LANES.bar, 'class="span" rx="2" fill="' + spec.paints[sp.paint] +
                      '" opacity="0.15"').replace("/>", "><title>" + esc(spec.lanes[sp.lane] +
                      ": " + sp.label + " (" + sp.start.toFixed(1) + "–" + sp.end.toFixed(1) +
                      ")") + "</title></rect>"));
    });
    const tagged = [...new Set(spec.spans.filter(function (sp) { return sp.tag; })
      .map(function (sp) { return sp.lane; }))];
    tagged.forEach(function (k) {
      parts.push(text(0, LANES.top + k * LANES.row + LANES.row / 2 + 4, "",
                      'class="held" data-lane="' + k + '" ' + small));
    });
    const step = niceStep(spec.end);
    for (let t = 0; t <= spec.end + 1e-9; t += step) {
      parts.push('<line x1="' + laneX(t) + '" x2="' + laneX(t) + '" y1="' + h + '" y2="' +
                 (h + 5) + '" stroke="' + c.ink + '"/>',
                 text(laneX(t), h + 18, String(Math.round(t * 10) / 10), small +
                      ' text-anchor="middle"'));
    }
    parts.push(text(LANES.label + LANES.plot / 2, h + 36,
                    "time (model units; one product of 64 × Bc × d = 1)", small +
                    ' text-anchor="middle"'),
               '<line id="tcursor" y1="' + LANES.top + '" y2="' + h + '" stroke="' + c.ink +
               '" stroke-width="2"/>');
    const legend = Object.keys(spec.paints).map(function (p) {
      return '<span class="key"><i style="background:' + esc(spec.paints[p]) + '"></i>' +
        esc(p) + "</span>";
    }).join("");
    return (spec.title ? '<div class="heading">' + esc(spec.title) + "</div>" : "") +
      '<svg viewBox="0 0 ' + (LANES.label + LANES.plot + 12) + " " + (h + 44) +
      '" preserveAspectRatio="xMinYMin meet" role="img" aria-label="spans in lanes over ' +
      'time">' + parts.join("") + '</svg><div class="legend">' + legend + "</div>";
  }

  let spanState = [];
  function drawLanes(pos, frac) {
    const f = spec.frames[idx], next = spec.frames[Math.min(idx + 1, n - 1)];
    const t = playing ? f.t + (next.t - f.t) * frac : f.t;
    ease({t: t});
    const now = playing ? t : cursor.t;
    el.tcursor.setAttribute("x1", String(laneX(now)));
    el.tcursor.setAttribute("x2", String(laneX(now)));
    spec.spans.forEach(function (sp, k) {
      const on = sp.start <= now + 1e-9;
      if (spanState[k] !== on) {
        spanState[k] = on;
        el.span[k].setAttribute("opacity", on ? "1" : "0.15");
      }
    });
    el.held.forEach(function (node) {
      const lane = Number(node.dataset.lane);
      const sp = spec.spans.find(function (s) {
        return s.tag && s.lane === lane && s.start <= now + 1e-9 && s.end > now + 1e-9; });
      node.textContent = sp ? sp.short : "";
      node.setAttribute("x", String(laneX(now) + 4));
    });
  }

  const BOARDS = {
    loop: function () { return loopSvg() + '<div id="hbmtext" class="note"></div>'; },
    row: function () { return rowSvg() + '<div id="readout" class="note"></div>'; },
    backward: backwardSvg, merge: mergeSvg, lanes: lanesSvg,
  };
  const DRAW = {loop: drawLoop, row: drawRow, backward: drawBackward, merge: drawMerge,
                lanes: drawLanes};

  // ---- the kernel source beside the board -------------------------------------------------
  function codePanel() {
    const wrap = document.createElement("div");
    wrap.className = "code";
    const head = document.createElement("div");
    head.className = "codehead";
    head.textContent = spec.code.path;
    el.phase = document.createElement("div");
    el.phase.className = "phase";
    el.src = document.createElement("div");
    el.src.className = "src";
    el.lines = [];
    spec.code.lines.forEach(function (line, k) {
      const row = document.createElement("div");
      row.className = "ln";
      const no = document.createElement("span");
      no.className = "no"; no.textContent = String(spec.code.first + k);
      const tx = document.createElement("span");
      tx.className = "tx"; tx.textContent = line || " ";
      row.append(no, tx);
      el.src.append(row);
      el.lines.push(row);
    });
    wrap.append(head, el.phase, el.src);
    return wrap;
  }

  let litKey = "";
  function drawCode(frac) {
    if (!spec.code) return;
    const phases = spec.frames[idx].phases;
    const now = playing && phases.length ? phases[Math.min(phases.length - 1,
                                                           Math.floor(frac * phases.length))]
      : null;
    const key = idx + "/" + now;
    if (key === litKey) return;
    litKey = key;
    el.lines.forEach(function (row) { row.className = "ln"; });
    let first = null;
    phases.forEach(function (p) {
      const span = spec.code.phases[p];
      if (!span) return;
      for (let l = span[0]; l <= span[1]; l++) {
        const row = el.lines[l - spec.code.first];
        if (row) row.className = "ln " + (now === null || p === now ? "hl" : "step");
      }
      if (now === null ? first === null : p === now) first = span[0];
    });
    el.phase.textContent = phases.length ? phases.map(function (p) {
      return (p === now ? "▸ " : "") + spec.code.labels[p];
    }).join("  ·  ") : "no phase: the causal mask skips this tile";
    document.body.dataset.phase = now || phases.join(" ");
    if (first !== null) {           // scroll the source, never the page around it
      const row = el.lines[first - spec.code.first];
      if (row) el.src.scrollTop = Math.max(0, row.offsetTop - el.src.offsetTop - 8);
    }
  }

  // ---- drawing ----------------------------------------------------------------------------
  function show(pos, moved) {
    idx = clamp(Math.floor(pos));
    const frac = playing ? pos - Math.floor(pos) : 1;
    DRAW[spec.kind](pos, frac);
    drawCode(frac);
    el.slider.value = String(idx);
    el.count.textContent = (spec.url.label || "step") + " " + (idx + spec.url.base) + " of " +
      (n - 1 + spec.url.base);
    const f = spec.frames[idx];
    el.caption.textContent = f.label !== undefined ? "Step " + (idx + 1) + " of " + n + ": " +
      f.label : "";
    document.body.dataset.step = String(idx + spec.url.base);
  }

  function tick(now) {
    if (spec) {
      if (playing) {
        t += (now - lastTick) / 1000 * BASE_RATE * speed;
        lastTick = now;
        if (t >= n) { t = n - 1; show(t, true); play(false); }
        else {
          const before = idx;
          show(t, true);
          if (idx !== before || urlPending) writeUrl(false);
        }
      } else if (cursor) {
        show(idx, false);            // let the motion settle
      }
    }
    window.requestAnimationFrame(tick);
  }

  window.requestAnimationFrame(tick);
  if (window.ResizeObserver) new ResizeObserver(setHeight).observe(document.documentElement);
  send("streamlit:componentReady", {apiVersion: 1});
})();
