// A minimal DOM for explorer.js under node (no browser, no npm package): enough elements,
// events and fetch for the page's search and compare flows. Used by test_explorer_page.py.
"use strict";
const fs = require("fs");

class Element {
  constructor(tag) {
    this.tagName = tag; this.children = []; this.dataset = {}; this.style = {};
    this.listeners = {}; this.hidden = false; this.value = ""; this.className = ""; this._text = "";
    this.classList = { toggle: () => {} };
  }
  get textContent() { return this._text + this.children.map((c) => c.textContent).join(""); }
  set textContent(v) { this._text = String(v); this.children = []; }
  get options() { return this.children; }
  append(...nodes) {
    for (const n of nodes) this.children.push(typeof n === "string" ? Object.assign(new Element("#text"), { _text: n }) : n);
  }
  replaceChildren(...nodes) { this.children = []; this._text = ""; this.append(...nodes); }
  addEventListener(name, fn) { (this.listeners[name] = this.listeners[name] || []).push(fn); }
  dispatchEvent(ev) { for (const fn of this.listeners[ev.type] || []) fn(ev); }
  setAttribute() {}
  focus() {}
}

const ids = ["q", "filter", "profile", "k", "search-form", "key-form", "key", "status", "signals", "spec",
  "reset", "ranking-label", "results", "doc", "compare", "compare-toggle", "compare-form", "compare-a",
  "compare-b", "overlap", "compare-result", "pager", "prev", "next", "page-info", "facet-fields", "facets"];
const byId = {};
for (const id of ids) byId[id] = new Element("div");
byId.k.value = "10";
byId.compare.hidden = true;
const docListeners = {};
global.document = {
  getElementById: (id) => byId[id],
  createElement: (tag) => new Element(tag),
  addEventListener: (name, fn) => { docListeners[name] = fn; },
  body: { dataset: {} },
};
global.Event = class { constructor(type) { this.type = type; } };

// Scripted answers, in order: [status, body] per request.
const answers = JSON.parse(process.argv[3]);
const requests = [];
global.fetch = async (path, init) => {
  requests.push({ path, body: init && init.body ? JSON.parse(init.body) : null });
  sent.push([path, init && init.body ? JSON.parse(init.body) : null]);
  const [status, body] = answers.shift();
  return { status, ok: status < 400, json: async () => body };
};

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));
const snapshot = () => ({
  status: byId.status.textContent, statusClass: byId.status.className,
  results: byId.results.children.map((c) => ({ className: c.className, key: c.dataset.key || null, text: c.textContent })),
  label: byId["ranking-label"].textContent,
  compare: byId["compare-result"].textContent, overlap: byId.overlap.textContent,
  pager: { hidden: byId.pager.hidden, info: byId["page-info"].textContent, prev: !!byId.prev.disabled, next: !!byId.next.disabled },
  requests: requests.splice(0),
  facets: byId.facets.textContent, filter: byId.filter.value,
  doc: byId.doc.children.map((c) => [c.tagName, c.textContent]),
});
// Every element under ``node`` whose className is ``name``, in document order.
const find = (node, name) => [
  ...(node.className === name ? [node] : []), ...node.children.flatMap((c) => find(c, name)),
];
// Requests the page sent, as [path, body], for the tests to check.
const sent = [];

(async () => {
  eval(fs.readFileSync(process.argv[2], "utf8"));
  docListeners.DOMContentLoaded();
  await settle();
  const seen = [];
  for (const step of JSON.parse(process.argv[4])) {
    if (step === "search") { byId.q.value = "graph"; byId["search-form"].dispatchEvent({ type: "submit", preventDefault() {} }); }
    if (step === "next" || step === "prev") byId[step].dispatchEvent({ type: "click" });
    if (step === "facets") { byId.q.value = "graph"; byId["facet-fields"].value = "tags, year"; byId["search-form"].dispatchEvent({ type: "submit", preventDefault() {} }); }
    if (step === "click-facet") find(byId.facets, "facet-value")[0].dispatchEvent({ type: "click" });
    if (step === "open-first") byId.results.children[0].dispatchEvent({ type: "click" });
    if (step === "compare") { byId.q.value = "graph"; byId["compare-form"].dispatchEvent({ type: "submit", preventDefault() {} }); }
    await settle();
    seen.push({ ...snapshot(), sent: sent.length ? sent[sent.length - 1] : null });
  }
  process.stdout.write(JSON.stringify(seen));
})();
