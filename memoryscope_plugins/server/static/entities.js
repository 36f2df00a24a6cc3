/* The memory browser's Entities view (served at /static/entities.js, after browser.js, whose helpers it
   uses): the user's entities with kind and order filters, a plot of the top entities' mentions per month
   drawn here as SVG (no library), an entity's details and memories with rename, alias, merge and delete,
   and the profile with each key's history, a value set or removed by hand. */
"use strict";
const PLOT_SERIES = 5;  // entities drawn in the plot: the first ones of the list with a mention
const PALETTE = ["#2a7", "#d92", "#25a", "#c33", "#a5d", "#0aa", "#777"];
const SVG_NS = "http://www.w3.org/2000/svg";
let shownEntity = null;  // the id of the entity the detail shows
let loading = 0;  // loads under way: the view has the class "loading" until the last one ends

function entityPath(name, ...rest){ return userPath("entities", name, ...rest); }
function svg(tag, attrs){
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}
function svgText(text, attrs){ const e = svg("text", attrs); e.textContent = text; return e; }
function svgTitle(text){ const e = svg("title"); e.textContent = text; return e; }
function day(iso){ return iso ? iso.slice(0, 10) : "?"; }
function failed(e){ status("error: " + e.message); }

const VIEWS = ["memories", "entities", "agents"];  // <name>View and its button view<Name>
function showView(name){
  for (const view of VIEWS){
    $(view + "View").hidden = view !== name;
    $("view" + view[0].toUpperCase() + view.slice(1)).classList.toggle("on", view === name);
  }
  if (name === "entities") loadEntities().catch(failed);
}
function entitiesShown(){ return !$("entitiesView").hidden; }

async function loadEntities(){
  $("entitiesView").classList.add("loading"); loading++;
  try { await drawEntities(); } finally { if (--loading === 0) $("entitiesView").classList.remove("loading"); }
}
async function drawEntities(){
  if (!$("user").value){ for (const id of ["entityList", "entityPlot", "profile"]) $(id).textContent = ""; return; }
  const q = new URLSearchParams({order: $("entityOrder").value, limit: "50"});
  if ($("entityKind").value) q.set("kind", $("entityKind").value);
  const list = (await (await api("GET", userPath("entities") + "?" + q)).json()).entities;
  $("entityList").replaceChildren(...(list.length ? list.map(entityRow) : [el("div", "meta", "no entities")]));
  await drawPlot(list.filter(e => e.mention_count > 0).slice(0, PLOT_SERIES));
  await loadProfile();
  if (shownEntity) await showEntity(shownEntity);
}

function entityRow(e){
  const row = el("div", "entity" + (e.id === shownEntity ? " on" : ""));
  row.dataset.id = e.id;
  row.append(el("span", "count", String(e.mention_count)), el("span", "name", e.name),
             el("span", "meta", " " + e.kind + (e.aliases.length ? " · also " + e.aliases.join(", ") : "")));
  row.onclick = () => showEntity(e.id).catch(failed);
  return row;
}

// One line per entity over the months any of them was mentioned in (0 where it was not), with a dot and
// a tooltip on each month it was. Entities with the same count in a month would draw one line over the
// other (one seen as a flat 0 beside another's 1): each series is drawn DODGE px from the next, so
// every line stays visible; the axis and the tooltips give the counts.
const DODGE = 3;
async function drawPlot(top){
  if (!top.length){ $("entityPlot").replaceChildren(el("div", "meta", "no mentions yet")); return; }
  const series = [];
  for (const e of top){
    const q = new URLSearchParams({limit: "1", bucket: "month"});
    const d = await (await api("GET", entityPath(e.id) + "?" + q)).json();
    series.push({entity: e, counts: new Map(d.timeline.map(p => [p.start.slice(0, 7), p.mentions]))});
  }
  const months = [...new Set(series.flatMap(s => [...s.counts.keys()]))].sort();
  const W = 760, H = 220, L = 36, R = 14, T = 12, B = 28;
  const most = Math.max(1, ...series.flatMap(s => [...s.counts.values()]));
  const x = (i) => L + (months.length === 1 ? (W - L - R) / 2 : i * (W - L - R) / (months.length - 1));
  const y = (n, k) => T + (H - T - B) * (1 - n / most) + (k - (series.length - 1) / 2) * DODGE;
  const plot = svg("svg", {viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "mentions per month of the top entities"});
  plot.append(svg("line", {class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B}),
              svg("line", {class: "axis", x1: L, y1: T, x2: L, y2: H - B}),
              svgText(String(most), {x: L - 6, y: T + 4, "text-anchor": "end"}),
              svgText("0", {x: L - 6, y: H - B, "text-anchor": "end"}));
  const step = Math.ceil(months.length / 8);  // at most about 8 month labels
  const anchor = (i) => months.length === 1 ? "middle" : i === 0 ? "start" : i === months.length - 1 ? "end" : "middle";
  months.forEach((m, i) => { if (i % step === 0 || i === months.length - 1)
    plot.appendChild(svgText(m, {class: "month", x: x(i), y: H - 8, "text-anchor": anchor(i)})); });
  const legend = el("div", "legend");
  series.forEach((s, n) => {
    const color = PALETTE[n % PALETTE.length];
    const g = svg("g", {class: "series", "data-entity": s.entity.id, stroke: color, fill: color});
    g.appendChild(svgTitle(s.entity.name));
    g.appendChild(svg("polyline", {fill: "none", "stroke-width": 2,
                                   points: months.map((m, i) => x(i) + "," + y(s.counts.get(m) || 0, n)).join(" ")}));
    months.forEach((m, i) => {
      if (!s.counts.has(m)) return;
      const dot = svg("circle", {class: "point", cx: x(i), cy: y(s.counts.get(m), n), r: 3});
      dot.appendChild(svgTitle(s.entity.name + " · " + m + ": " + s.counts.get(m)));
      g.appendChild(dot);
    });
    plot.appendChild(g);
    const swatch = el("i"); swatch.style.background = color;
    const item = el("span", "", s.entity.name); item.prepend(swatch); legend.appendChild(item);
  });
  $("entityPlot").replaceChildren(plot, legend);
}

async function showEntity(name){
  const d = await (await api("GET", entityPath(name) + "?limit=50")).json();
  const e = d.entity; shownEntity = e.id;
  for (const row of document.querySelectorAll("#entityList .entity")) row.classList.toggle("on", row.dataset.id === e.id);
  const box = el("div", "detail"); box.dataset.id = e.id;
  box.appendChild(el("h3", "name", e.name));
  box.appendChild(el("div", "meta", e.kind + " · " + e.mention_count + " mentions" +
                     (e.first_mentioned_at ? " · first " + day(e.first_mentioned_at) + " · last " + day(e.last_mentioned_at) : "")));
  if (e.aliases.length) box.appendChild(el("div", "aliases", "also: " + e.aliases.join(", ")));
  const act = el("div", "actions");
  const button = (cls, text, run) => { const b = el("button", cls, text); b.onclick = run; act.appendChild(b); };
  button("rename", "Rename", async () => { const t = prompt("New name", e.name); if (!t || t === e.name) return;
    await entityAct(() => api("PATCH", entityPath(e.id), {name: t}), "renamed"); });
  button("alias", "Add alias", async () => { const t = prompt("Another name for " + e.name); if (!t) return;
    await entityAct(() => api("POST", entityPath(e.id, "aliases"), {alias: t}), "alias added"); });
  button("merge", "Merge another into this", async () => {
    const t = prompt("Merge which entity into " + e.name + "? (its name)"); if (!t) return;
    await entityAct(() => api("POST", entityPath(e.id, "merge"), {other: t}), "merged"); });
  button("delete", "Delete", async () => { if (!confirm("Delete " + e.name + " and its links? The memories stay.")) return;
    shownEntity = null; $("entityDetail").replaceChildren(el("div", "meta", "pick an entity"));
    await entityAct(() => api("DELETE", entityPath(e.id)), "deleted"); });
  box.appendChild(act);
  if (d.timeline.length)
    box.appendChild(el("div", "meta timeline", "mentions: " + d.timeline.map(p => p.start.slice(0, 7) + " ×" + p.mentions).join(", ")));
  for (const v of d.profile) box.appendChild(profileValue(v, false));
  const memories = el("div", "memories");
  for (const m of d.memories){ const b = memoryBox(m); b.querySelector(".actions").remove(); memories.appendChild(b); }
  if (!d.memories.length) memories.appendChild(el("div", "meta", "no memories"));
  box.appendChild(memories);
  $("entityDetail").replaceChildren(box);
}
async function entityAct(call, done){ try { await call(); status(done); await loadEntities(); } catch(e){ failed(e); } }

async function loadProfile(){
  const profile = (await (await api("GET", userPath("profile"))).json()).profile;
  const boxes = Object.keys(profile).sort().map(k => profileKey(k, profile[k]));
  $("profile").replaceChildren(...(boxes.length ? boxes : [el("div", "meta", "no profile yet")]));
}
function profileKey(name, values){
  const box = el("div", "pkey"); box.dataset.key = name;
  const toggle = el("button", "history-toggle", "History");
  box.append(el("span", "name", name + " "), toggle);
  for (const v of values) box.appendChild(profileValue(v, true));
  const history = el("div", "history"); history.hidden = true; box.appendChild(history);
  toggle.onclick = async () => {
    if (!history.hidden){ history.hidden = true; return; }
    try {
      const all = (await (await api("GET", userPath("profile", name, "history"))).json()).history;
      history.replaceChildren(...all.map(v => profileValue(v, false))); history.hidden = false;
    } catch(e){ failed(e); }
  };
  return box;
}
function profileValue(v, removable){
  const row = el("div", "pval" + (v.current ? "" : " ended")); row.dataset.id = v.id;
  const span = v.current ? "since " + day(v.valid_from) : day(v.valid_from) + " → " + day(v.valid_to);
  row.append(el("span", "v", v.value),
             el("span", "meta", " · " + span + " · set by " + v.set_by + (v.source_ids.length ? " · sources: " + v.source_ids.length : "")));
  if (removable && v.current){
    const b = el("button", "remove", "Remove");
    b.onclick = async () => { if (!confirm("End \"" + v.value + "\" now? It stays in the history.")) return;
      try { await api("DELETE", userPath("profile", "values", v.id)); status("removed"); await loadProfile(); } catch(e){ failed(e); } };
    row.appendChild(b);
  }
  return row;
}

$("viewMemories").onclick = () => showView("memories");
$("viewEntities").onclick = () => showView("entities");
$("entityKind").onchange = $("entityOrder").onchange = () => loadEntities().catch(failed);
$("user").addEventListener("change", () => { shownEntity = null; $("entityDetail").replaceChildren(el("div", "meta", "pick an entity"));
  if (entitiesShown()) loadEntities().catch(failed); });
$("profileForm").onsubmit = async (ev) => {
  ev.preventDefault();
  const k = $("profileKey").value.trim(), v = $("profileValue").value.trim();
  if (!$("user").value || !k || !v) return;
  try {
    await api("PUT", userPath("profile", k), {value: v, replace: $("profileReplace").checked});
    $("profileValue").value = ""; status("profile set"); await loadProfile();
  } catch(e){ failed(e); }
};
