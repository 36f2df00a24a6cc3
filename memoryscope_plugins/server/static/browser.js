/* The memory browser (served at /static/browser.js; the page's CSP allows no inline script). */
"use strict";
const $ = (id) => document.getElementById(id);
let byId = new Map();
function key(){ return sessionStorage.getItem("msKey") || ""; }
function status(t){ $("status").textContent = t; }
async function api(method, path, body){
  const r = await fetch(path, {method, headers: {"Authorization": "Bearer " + key(), "Content-Type": "application/json"},
                               body: body === undefined ? undefined : JSON.stringify(body)});
  if (!r.ok){ let m = r.status; try { m += " " + (await r.json()).error; } catch(e){} throw new Error(m); }
  return r;
}
function el(tag, cls, text){ const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; }
// Every URL is built from encoded parts: an id is one path segment whatever it holds ("?", "#", "%", "/").
function path(...parts){ return "/v1/users/" + parts.map(encodeURIComponent).join("/"); }
function userPath(...rest){ return path($("user").value, ...rest); }
function memoryPath(id){ return userPath("memories", id); }
async function loadUsers(){
  try {
    const data = await (await api("GET", "/v1/users")).json();
    const sel = $("user"); sel.length = 1;
    for (const u of data.users){ const o = el("option", "", u); o.value = u; sel.appendChild(o); }
    status("connected: " + data.users.length + " users");
  } catch(e){ status("error: " + e.message); }
}
function memoryBox(m, score){
  const box = el("div", "mem " + m.type + (m.status === "expired" ? " expired" : ""));
  box.dataset.id = m.id;
  box.appendChild(el("div", "text", m.content));
  const meta = el("div", "meta");
  meta.appendChild(el("span", "badge", m.type));
  if (m.status === "expired") meta.appendChild(el("span", "badge", "expired"));
  if (score !== undefined) meta.appendChild(el("span", "score", "score " + score.toFixed(4) + " "));
  meta.appendChild(document.createTextNode((m.speaker ? m.speaker + " · " : "") + (m.when || m.created_at.slice(0, 10))));
  box.appendChild(meta);
  if (m.superseded_by){
    const by = byId.get(m.superseded_by);
    box.appendChild(el("div", "meta replaced", "replaced by: " + (by ? by.content : m.superseded_by)));
  }
  if (m.source_ids && m.source_ids.length && m.type !== "turn"){
    const src = el("div", "meta sources", "sources: ");
    for (const s of m.source_ids){ src.appendChild(el("div", "", "↳ " + (byId.has(s) ? byId.get(s).content : s))); }
    box.appendChild(src);
  }
  const act = el("div", "actions");
  const edit = el("button", "edit", "Edit"), exp = el("button", "expire", m.status === "expired" ? "Restore" : "Expire"), del = el("button", "delete", "Delete");
  edit.onclick = async () => { const t = prompt("New text", m.content); if (t === null || t === m.content) return;
    await act_(() => api("PATCH", memoryPath(m.id), {content: t}), "edited"); };
  exp.onclick = () => act_(() => api("PATCH", memoryPath(m.id), {status: m.status === "expired" ? "active" : "expired"}), "status changed");
  del.onclick = async () => { if (!confirm("Delete this memory for good?")) return;
    await act_(() => api("DELETE", memoryPath(m.id)), "deleted"); };
  act.append(edit, exp, del); box.appendChild(act);
  return box;
}
async function act_(call, done){ try { await call(); status(done); await loadTimeline(); } catch(e){ status("error: " + e.message); } }
async function loadTimeline(){
  const tl = $("timeline"); tl.textContent = "";
  if (!$("user").value) return;
  const q = new URLSearchParams({limit: "500", include_expired: String($("showExpired").checked)});
  if ($("typeFilter").value) q.set("types", $("typeFilter").value);
  const all = (await (await api("GET", userPath("memories") + "?limit=1000")).json()).memories;
  byId = new Map(all.map(m => [m.id, m]));
  const shown = (await (await api("GET", userPath("memories") + "?" + q)).json()).memories;
  let day = "";
  for (const m of shown){
    const d = m.created_at.slice(0, 10);  // grouped by the day it was said; the event time is in its label
    if (d !== day){ day = d; tl.appendChild(el("div", "day", d)); }
    tl.appendChild(memoryBox(m));
  }
  if (!shown.length) tl.appendChild(el("div", "meta", "no memories"));
  $("export").disabled = false;
}
$("connect").onclick = () => { sessionStorage.setItem("msKey", $("key").value.trim()); $("key").value = ""; loadUsers(); };
$("user").onchange = () => { $("results").textContent = ""; loadTimeline().catch(e => status("error: " + e.message)); };
$("showExpired").onchange = $("typeFilter").onchange = () => loadTimeline().catch(e => status("error: " + e.message));
$("searchForm").onsubmit = async (ev) => {
  ev.preventDefault(); const out = $("results"); out.textContent = "";
  if (!$("user").value || !$("query").value.trim()) return;
  try {
    const r = await (await api("POST", userPath("retrieve"), {query: $("query").value, top_k: 10})).json();
    for (const s of r.memories) out.appendChild(memoryBox(s.memory, s.score));
    if (!r.memories.length) out.appendChild(el("div", "meta", "nothing found"));
    status("search took " + r.timings_ms.total_ms.toFixed(1) + " ms");
  } catch(e){ status("error: " + e.message); }
};
$("export").onclick = async () => {
  try {
    const blob = await (await api("GET", userPath("export"))).blob();
    const a = el("a"); a.href = URL.createObjectURL(blob); a.download = $("user").value + ".jsonl"; a.click();
    status("exported");
  } catch(e){ status("error: " + e.message); }
};
if (key()) loadUsers();
