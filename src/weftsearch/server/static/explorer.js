// weft-search explorer: plain DOM code over the HTTP API (v1/search, v1/profiles,
// v1/compare, v1/documents/{key}; relative URLs, so a proxy may mount the server under a
// prefix). No framework, no build step, nothing from a CDN.
// Text from the server is only ever set with textContent, never parsed as HTML.
"use strict";

(function () {
  const FUSERS = ["rrf", "weighted", "score", "learned"];
  // Signals offered beside those of the selected ranking (text-only queries: no vector here).
  const PALETTE = ["bm25", "graph(seed=bm25)", "pagerank(seed=bm25)", "recency(half_life=365)"];
  const COLOURS = ["#3b6fb6", "#c0792b", "#3c9a5f", "#a8479b", "#b23b3b", "#5f5f9a"];

  const state = {
    key: null,          // the API key, in memory only
    profiles: [],       // from /v1/profiles
    signals: [],        // [{expr, on, weight}]
    fuser: "rrf",       // the selected ranking's fuser
    fuserParams: {},    // its keyword parameters (k, norm)
    depth: null,        // its depth
    filter: null,       // the selected profile's default filter (kept when searching with an inline spec)
    baseSpec: null,     // the selected ranking's spec text (null until known)
    custom: false,      // the user changed a toggle or weight: search with an inline spec
    lastQuery: "",
    pageBody: null,     // the first page's request: the other pages send it with after=
    cursors: [null],    // cursors[i]: the after= of page i (null for the first page)
    page: 0,            // the page shown, from 0
    highlight: true,    // ask for snippets (off once a server says it cannot highlight)
  };

  const $ = (id) => document.getElementById(id);
  const el = (tag, props, ...children) => {
    const node = document.createElement(tag);
    Object.assign(node, props || {});
    for (const child of children) node.append(child);
    return node;
  };

  function status(text, isError) {
    $("status").textContent = text || "";
    $("status").className = isError ? "error" : "";
  }

  // ---- HTTP

  async function api(method, path, body) {
    const headers = { "content-type": "application/json" };
    if (state.key) headers["X-API-Key"] = state.key;
    const response = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (response.status === 401 || response.status === 403) {
      $("key-form").hidden = false;
      $("key").focus();
      throw new Error(response.status === 401 ? "this server needs an API key" : "the API key is not valid");
    }
    if (!response.ok) {
      const err = data && data.error ? data.error : null;
      const where = err && err.field ? " (" + err.field + ")" : "";
      const error = new Error((err ? err.message : "HTTP " + response.status) + where);
      error.field = err ? err.field : null;
      throw error;
    }
    return data;
  }

  // ---- spec text: split a ranking expression into fuser, scorers and parameters

  function splitTop(text) {
    const parts = [];
    let depth = 0, start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (c === "(" || c === "[") depth++;
      else if (c === ")" || c === "]") depth--;
      else if (c === "," && depth === 0) { parts.push(text.slice(start, i).trim()); start = i + 1; }
    }
    const last = text.slice(start).trim();
    if (last) parts.push(last);
    return parts;
  }

  function parseSpec(spec) {
    let text = spec.trim();
    let depth = null;
    const at = /@\s*(\d+)\s*$/.exec(text);
    if (at) { depth = Number(at[1]); text = text.slice(0, at.index).trim(); }
    const m = /^([a-z_][a-z0-9_]*)\s*\(([\s\S]*)\)$/i.exec(text);
    if (!m || FUSERS.indexOf(m[1]) < 0) return { fuser: null, scorers: [text], params: {}, depth };
    const scorers = [], params = {};
    for (const item of splitTop(m[2])) {
      const kw = /^([a-z_][a-z0-9_]*)\s*=\s*([\s\S]*)$/i.exec(item);
      if (kw) params[kw[1]] = kw[2].trim(); else scorers.push(item);
    }
    return { fuser: m[1], scorers, params, depth };
  }

  function signalName(expr) { return expr.split("(")[0].trim(); }

  function useSpec(spec, depth, filter) {
    const parsed = parseSpec(spec);
    let weights = null;
    if (parsed.params.weights) {
      weights = parsed.params.weights.replace(/[[\]]/g, "").split(",").map(Number);
    }
    state.fuser = parsed.fuser === "score" ? "score" : "rrf";
    state.fuserParams = parsed.params;
    state.depth = depth || parsed.depth;
    state.filter = filter || null;
    state.baseSpec = spec;
    state.custom = false;
    state.signals = parsed.scorers.map((expr, i) => ({
      expr, on: true, weight: weights && isFinite(weights[i]) ? weights[i] : 1,
    }));
    const present = new Set(state.signals.map((s) => signalName(s.expr)));
    for (const expr of PALETTE) {
      if (!present.has(signalName(expr))) state.signals.push({ expr, on: false, weight: 1 });
    }
    renderSignals();
  }

  // The inline spec the toggles and weights describe.
  function customSpec() {
    const on = state.signals.filter((s) => s.on);
    if (!on.length) return null;
    const depth = state.depth ? "@" + state.depth : "";
    if (on.length === 1) return on[0].expr + depth;
    const exprs = on.map((s) => s.expr).join(", ");
    const weights = "weights=[" + on.map((s) => String(s.weight)).join(", ") + "]";
    if (state.fuser === "score") {
      const norm = state.fuserParams.norm ? ", norm=" + state.fuserParams.norm : "";
      return "score(" + exprs + ", " + weights + norm + ")" + depth;
    }
    const k = state.fuserParams.k ? ", k=" + state.fuserParams.k : "";
    return "weighted(" + exprs + ", " + weights + k + ")" + depth;
  }

  // What the selected ranking is, as a request's ranking part.
  function selected(value) {
    if (value === "custom") return { spec: customSpec() };
    if (value) return { profile: value };
    return {};
  }

  // ---- signals panel

  function renderSignals() {
    const box = $("signals");
    box.replaceChildren();
    state.signals.forEach((signal, i) => {
      const toggle = el("input", { type: "checkbox", checked: signal.on });
      toggle.dataset.signal = signalName(signal.expr);
      toggle.addEventListener("change", () => { signal.on = toggle.checked; changed(); });
      const weight = el("input", {
        type: "number", min: "0", step: "0.1", value: String(signal.weight), className: "weight",
      });
      weight.setAttribute("aria-label", "weight of " + signal.expr);
      weight.addEventListener("change", () => {
        const w = Number(weight.value);
        if (isFinite(w) && w >= 0) { signal.weight = w; changed(); }
      });
      const swatch = el("span", { className: "swatch" });
      swatch.style.background = COLOURS[i % COLOURS.length];
      box.append(el("div", { className: "signal" + (signal.on ? "" : " off") },
        el("label", { title: signal.expr }, toggle, swatch, " " + signal.expr), weight));
    });
    $("spec").textContent = state.custom ? (customSpec() || "(no signal on)") : (state.baseSpec || "");
    $("reset").hidden = !state.custom;
    refreshCompareOptions();
  }

  function changed() {
    state.custom = true;
    renderSignals();
    if (state.lastQuery) search();
  }

  // ---- search and results

  // A new search starts at the first page; Next and Previous send the same request with the
  // cursor of the page wanted (kept from the pages seen), so every page reads one snapshot.
  async function search() {
    const text = $("q").value.trim();
    state.lastQuery = text;
    if (!text) { status("type a query"); return; }
    const body = { text, k: Number($("k").value) || 10, explain: true };
    const filter = $("filter").value.trim();
    if (filter) body.filter = filter;
    const facets = $("facet-fields").value.split(",").map((f) => f.trim()).filter((f) => f);
    if (facets.length) body.facets = facets;
    if (state.custom) {
      const spec = customSpec();
      if (!spec) { status("turn on at least one signal", true); return; }
      body.spec = spec;
      if (!filter && state.filter) body.filter = state.filter;  // the profile's default filter
    } else if ($("profile").value) {
      body.profile = $("profile").value;
    }
    state.pageBody = body;
    state.cursors = [null];
    state.page = 0;
    if (state.highlight) body.highlight = { fields: ["text"], fragment_size: 160, number_of_fragments: 1 };
    status("searching…");
    try {
      let result;
      try {
        result = await api("POST", "v1/search", body);
      } catch (e) {
        if (e.field !== "highlight") throw e;
        state.highlight = false;  // this server cannot highlight: search without snippets
        delete body.highlight;
        result = await api("POST", "v1/search", body);
      }
      if (!state.custom && state.baseSpec === null && result.ranking.spec) useSpec(result.ranking.spec);
      showPage(result);
      if (!$("compare").hidden) compare();
    } catch (e) {
      failed("results", e.message);
    }
  }

  async function turnPage(step) {
    const page = state.page + step;
    if (!state.pageBody || page < 0 || page >= state.cursors.length) return;
    const body = Object.assign({}, state.pageBody);
    if (state.cursors[page]) body.after = state.cursors[page];
    status("searching…");
    try {
      const result = await api("POST", "v1/search", body);
      state.page = page;
      showPage(result);
    } catch (e) {
      failed("results", e.message);
    }
  }

  function showPage(result) {
    state.cursors = state.cursors.slice(0, state.page + 1);
    if (result.next_cursor) state.cursors.push(result.next_cursor);
    renderResults(result);
    renderFacets(result.facets || null);
    const first = (result.offset || 0) + 1;
    const range = result.hits.length ? "hits " + first + "–" + (first + result.hits.length - 1) : "no hits";
    $("page-info").textContent = "page " + (state.page + 1) + " · " + range;
    $("prev").disabled = state.page === 0;
    $("next").disabled = !result.next_cursor;
    $("pager").hidden = state.page === 0 && !result.next_cursor;
    status(result.hits.length + " hits, page " + (state.page + 1) + ", generation " + result.generation);
  }

  // A filter literal of a facet value: strings quoted (backslash and quote escaped), numbers and
  // booleans as the filter language spells them.
  function literal(value) {
    if (typeof value === "string") return '"' + value.replace(/\\/g, "\\\\").replace(/"/g, '\\"') + '"';
    return String(value);
  }

  // A field name as the filter language reads it: plain, or between backquotes.
  function fieldName(name) {
    const words = ["and", "or", "not", "in", "exists", "true", "false", "contains", "any", "all"];
    if (/^[A-Za-z_][A-Za-z0-9_.-]*$/.test(name) && !words.includes(name.toLowerCase())) return name;
    return "`" + name.replace(/\\/g, "\\\\").replace(/`/g, "\\`") + "`";
  }

  // Each field's values with their counts; a click adds "field == value" to the filter (on a
  // list field, == means the list holds the value) and searches again.
  function renderFacets(facets) {
    const box = $("facets");
    box.replaceChildren();
    if (!facets) return;
    for (const [name, values] of Object.entries(facets)) {
      const list = el("ul", { className: "facet" });
      for (const entry of values) {
        const button = el("button", { type: "button", className: "facet-value" },
          el("span", { className: "value", textContent: String(entry.value) }),
          el("span", { className: "count", textContent: String(entry.count) }));
        button.dataset.field = name;
        button.addEventListener("click", () => {
          const condition = fieldName(name) + " == " + literal(entry.value);
          const current = $("filter").value.trim();
          $("filter").value = current ? "(" + current + ") and " + condition : condition;
          search();
        });
        list.append(el("li", {}, button));
      }
      if (!values.length) list.append(el("li", { className: "note", textContent: "no values" }));
      box.append(el("h3", { textContent: name }), list);
    }
  }

  // An error replaces what it failed to produce: the results (or the side by side) of an earlier
  // request are cleared, never left standing under the error as if they answered this one.
  function failed(where, message) {
    status(message, true);
    if (where === "results") {
      $("ranking-label").textContent = "";
      $("pager").hidden = true;
      $("facets").replaceChildren();
      $("results").replaceChildren(el("li", { className: "note error", textContent: "no results: " + message }));
    } else {
      $("overlap").textContent = "";
      $("compare-result").replaceChildren(el("p", { className: "note error", textContent: "no comparison: " + message }));
    }
  }

  function rankingText(label) {
    if (label.profile) return label.profile + " v" + label.version;
    return label.spec || "";
  }

  function renderResults(result) {
    $("ranking-label").textContent = rankingText(result.ranking) + " · fuser " + result.fuser;
    const list = $("results");
    list.replaceChildren();
    let top = 0;
    for (const hit of result.hits) {
      for (const s of hit.signals || []) top = Math.max(top, Math.abs(s.contribution));
    }
    for (const hit of result.hits) {
      const title = hit.fields && typeof hit.fields.title === "string" ? hit.fields.title : hit.key;
      const bars = el("div", { className: "bars" });
      (hit.signals || []).forEach((s, i) => {
        const fill = el("span", { className: "fill" });
        fill.style.width = (top > 0 ? (100 * Math.abs(s.contribution)) / top : 0).toFixed(1) + "%";
        fill.style.background = COLOURS[signalColour(s.signal, i)];
        const rank = s.rank === null ? "—" : "#" + s.rank;
        const bar = el("div", { className: "bar", title: s.signal + ": rank " + rank + ", score " +
          (s.score === null ? "—" : s.score.toPrecision(4)) + ", contribution " + s.contribution.toPrecision(4) },
          el("span", { className: "name", textContent: s.signal }),
          el("span", { className: "track" }, fill),
          el("span", { className: "rank", textContent: rank }));
        bar.dataset.signal = s.signal;
        bars.append(bar);
      });
      const item = el("li", { className: "hit", tabIndex: 0 },
        el("div", { className: "head" },
          el("span", { className: "title", textContent: title }),
          el("span", { className: "score", textContent: hit.score.toPrecision(4) })),
        el("div", { className: "key", textContent: hit.key }),
        ...snippetNodes(hit),
        bars);
      item.dataset.key = hit.key;
      item.addEventListener("click", () => openDocument(hit.key));
      item.addEventListener("keydown", (ev) => { if (ev.key === "Enter") openDocument(hit.key); });
      list.append(item);
    }
    if (!result.hits.length) list.append(el("li", { className: "note", textContent: "no hits" }));
  }

  // A hit's snippets as DOM: the unmarked text with each match in a <mark>, every piece set as
  // text (never parsed as HTML). Offsets are the server's code point offsets, so the text is
  // split into code points before slicing.
  function snippetNodes(hit) {
    const found = hit.highlights && hit.highlights.text;
    if (!found) return [];
    return found.snippets.map((snippet) => {
      const chars = Array.from(snippet.text);
      const node = el("p", { className: "snippet" });
      let cursor = 0;
      for (const [start, end] of snippet.spans) {
        const from = start - snippet.start, to = end - snippet.start;
        node.append(chars.slice(cursor, from).join(""), el("mark", { textContent: chars.slice(from, to).join("") }));
        cursor = to;
      }
      node.append(chars.slice(cursor).join(""));
      return node;
    });
  }

  // A signal keeps its colour from the signals panel where it is listed there.
  function signalColour(label, fallback) {
    const i = state.signals.findIndex((s) => signalName(s.expr) === label);
    return (i < 0 ? fallback : i) % COLOURS.length;
  }

  // ---- document view

  async function openDocument(key) {
    const box = $("doc");
    try {
      const doc = await api("GET", "v1/documents/" + encodeURIComponent(key));
      for (const li of $("results").children) li.classList.toggle("open", li.dataset.key === key);
      // A schema's "title" text field names the document first, then a "title" metadata field.
      const named = doc.text_fields || {};
      const title = typeof named.title === "string" ? named.title
        : typeof doc.fields.title === "string" ? doc.fields.title : doc.key;
      const meta = el("dl", {});
      meta.append(el("dt", { textContent: "key" }), el("dd", { textContent: doc.key }));
      if (doc.time !== null) {
        meta.append(el("dt", { textContent: "time" }),
          el("dd", { textContent: new Date(doc.time * 1000).toISOString().slice(0, 10) }));
      }
      for (const [name, value] of Object.entries(doc.fields)) {
        if (name !== "title") meta.append(el("dt", { textContent: name }), el("dd", { textContent: String(value) }));
      }
      const links = el("p", { className: "links" });
      for (const link of doc.links) {
        const button = el("button", { type: "button", textContent: link });
        button.addEventListener("click", () => openDocument(link));
        links.append(button, " ");
      }
      box.replaceChildren(el("h3", { textContent: title }), meta, el("p", { textContent: doc.text }));
      // The other named text fields, each under its name (set as text: never parsed as markup).
      for (const [name, text] of Object.entries(named)) {
        if (name !== "title" || title !== text) {
          box.append(el("h4", { className: "text-field", textContent: name }), el("p", { textContent: text }));
        }
      }
      if (doc.links.length) box.append(el("h4", { textContent: "links" }), links);
      if (doc.vector) box.append(el("p", { className: "note", textContent: "vector of " + doc.vector.length + " numbers" }));
      box.dataset.key = doc.key;
    } catch (e) {
      status(e.message, true);
    }
  }

  // ---- profiles

  async function loadProfiles() {
    try {
      const data = await api("GET", "v1/profiles");
      state.profiles = data.profiles;
      const select = $("profile");
      const current = select.value;
      select.replaceChildren(el("option", { value: "", textContent: "default" }));
      for (const p of state.profiles) {
        select.append(el("option", { value: p.name, textContent: p.name + " v" + p.version }));
      }
      select.value = current;
      refreshCompareOptions();
      status(state.profiles.length + " profiles");
      document.body.dataset.ready = "1";
    } catch (e) {
      status(e.message, true);
    }
  }

  function selectRanking() {
    const name = $("profile").value;
    const profile = state.profiles.find((p) => p.name === name);
    if (profile) useSpec(profile.spec, profile.depth, profile.filter);
    else { state.baseSpec = null; state.custom = false; state.filter = null; state.signals = []; renderSignals(); }
    if (state.lastQuery) search();
  }

  // ---- side by side

  function refreshCompareOptions() {
    for (const id of ["compare-a", "compare-b"]) {
      const select = $(id);
      const current = select.value;
      select.replaceChildren(el("option", { value: "", textContent: "default" }));
      for (const p of state.profiles) {
        select.append(el("option", { value: p.name, textContent: p.name + " v" + p.version }));
      }
      if (state.custom && customSpec()) select.append(el("option", { value: "custom", textContent: "custom: " + customSpec() }));
      const values = Array.from(select.options).map((o) => o.value);
      if (values.indexOf(current) >= 0) select.value = current;
      else if (id === "compare-b" && values.length > 1) select.value = values[values.length - 1];
    }
  }

  async function compare() {
    const text = $("q").value.trim();
    if (!text) { status("type a query to compare on", true); return; }
    const query = { text };
    const filter = $("filter").value.trim();
    if (filter) query.filter = filter;  // for both sides (otherwise each profile's own default)
    const body = {
      a: selected($("compare-a").value), b: selected($("compare-b").value),
      query, k: Number($("k").value) || 10,
    };
    try {
      const result = await api("POST", "v1/compare", body);
      renderCompare(result);
    } catch (e) {
      failed("compare", e.message);
    }
  }

  function renderCompare(result) {
    const q = result.queries.q;
    $("overlap").textContent = "Jaccard@" + result.k + " " + q.jaccard.toFixed(3) +
      " · RBO(p=" + result.p + ") " + q.rbo.toFixed(3);
    const moves = {};
    for (const m of q.moved) moves[m.key] = m;
    const column = (side, rows, label) => {
      const list = el("ol", {});
      for (const row of rows) {
        const m = moves[row.key];
        let mark = "", cls = "same";
        if (side === "b") {
          if (m.rank_a === null) { mark = "new"; cls = "new"; }
          else if (m.change > 0) { mark = "▲" + m.change; cls = "up"; }
          else if (m.change < 0) { mark = "▼" + (-m.change); cls = "down"; }
        } else if (m.rank_b === null) { mark = "gone"; cls = "gone"; }
        const item = el("li", { className: "moved " + cls },
          el("span", { className: "key", textContent: row.key }),
          el("span", { className: "mark", textContent: mark }));
        item.dataset.key = row.key;
        item.addEventListener("click", () => openDocument(row.key));
        list.append(item);
      }
      return el("div", { className: "column" }, el("h3", { textContent: label }), list);
    };
    $("compare-result").replaceChildren(
      column("a", q.a, "A: " + rankingText(result.a)),
      column("b", q.b, "B: " + rankingText(result.b)));
  }

  // ---- wiring

  document.addEventListener("DOMContentLoaded", () => {
    $("search-form").addEventListener("submit", (ev) => { ev.preventDefault(); search(); });
    $("profile").addEventListener("change", selectRanking);
    $("reset").addEventListener("click", () => { $("profile").dispatchEvent(new Event("change")); });
    $("compare-toggle").addEventListener("click", () => {
      $("compare").hidden = !$("compare").hidden;
      if (!$("compare").hidden) compare();
    });
    $("compare-form").addEventListener("submit", (ev) => { ev.preventDefault(); compare(); });
    $("prev").addEventListener("click", () => turnPage(-1));
    $("next").addEventListener("click", () => turnPage(1));
    $("key-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      state.key = $("key").value || null;
      $("key").value = "";
      $("key-form").hidden = true;
      loadProfiles().then(() => { if (state.lastQuery) search(); });
    });
    renderSignals();
    loadProfiles();
  });
})();
