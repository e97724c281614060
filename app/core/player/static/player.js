// The loop player: every frame of one animation arrives once (Streamlit's render message,
// args.spec, built by app/core/player/frames.py); Play, pause, speed and stepping run here,
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
      if (v === spec.url.base) u.searchParams.delete(spec.url.name);
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
    css.setProperty("--now", spec.kind === "loop" ? spec.colors.S_ij : spec.colors.K_j);
    const root = document.createElement("div");
    root.className = "player" + (spec.compact ? " compact" : "");
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
    el.board.innerHTML = spec.kind === "loop" ? loopSvg() + '<div id="hbmtext" class="note">'
      + "</div>" : rowSvg() + '<div id="readout" class="note"></div>';
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
     "mline", "mdot", "readout", "alpha"].forEach(function (id) {
      el[id] = el.board.querySelector("#" + id);
    });
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
    return '<text x="' + x + '" y="' + y + '" ' + (attrs || "") + ">" + s + "</text>";
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
    if (spec.kind === "loop") drawLoop(pos, frac); else drawRow(pos, frac);
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
