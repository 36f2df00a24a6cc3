/* The memory browser's Agents view (served at /static/agents.js, after browser.js and entities.js, whose
   helpers it uses): an agent's procedures (its tenant's; they need a key not bound to users) with the
   messages they rest on (the text of the viewed user's, a count of the others'), edited or deleted here,
   and the agent's tools for the viewed user with their calls, failures and most frequent errors. */
"use strict";
function agentPath(...rest){ return "/v1/agents/" + [$("agentId").value.trim(), ...rest].map(encodeURIComponent).join("/"); }

async function loadAgent(){
  if (!$("agentId").value.trim()) return;
  $("agentsView").classList.add("loading");
  try { await Promise.all([loadProcedures(), loadTools()]); }
  finally { $("agentsView").classList.remove("loading"); }
}

async function loadProcedures(){
  const q = new URLSearchParams({include_expired: String($("showExpiredProcedures").checked), limit: "200"});
  let list;
  try { list = (await (await api("GET", agentPath("procedures") + "?" + q)).json()).procedures; }
  catch(e){ $("procedures").replaceChildren(el("div", "meta", "procedures: " + e.message)); return; }
  $("procedures").replaceChildren(...(list.length ? list.map(procedureBox) : [el("div", "meta", "no procedures")]));
}

function procedureBox(p){
  const box = el("div", "mem procedure" + (p.status === "expired" ? " expired" : ""));
  box.dataset.id = p.id;
  box.appendChild(el("div", "text", p.content));
  const meta = el("div", "meta");
  for (const t of p.tools || []) meta.appendChild(el("span", "badge tool", t));
  meta.appendChild(document.createTextNode("runs " + p.runs + " · used " + p.uses + " (" + p.successes + " succeeded, "
    + p.failures + " failed) · weight " + Number(p.weight).toFixed(2)));
  box.appendChild(meta);
  if (p.superseded_by) box.appendChild(el("div", "meta replaced", "replaced by: " + p.superseded_by));
  // the viewed user's messages are in the timeline's map (a message's id is its turn's); the others' are counted
  const own = p.source_ids.filter(s => byId.has(s));
  const src = el("div", "meta sources", "sources: " + p.source_ids.length + " messages"
    + (own.length < p.source_ids.length ? " (" + (p.source_ids.length - own.length) + " not of this user, or tool calls)" : ""));
  for (const s of own) src.appendChild(el("div", "source", "↳ " + byId.get(s).content));
  box.appendChild(src);
  const act = el("div", "actions");
  const edit = el("button", "edit", "Edit"), del = el("button", "delete", "Delete");
  edit.onclick = async () => { const t = prompt("What to do", p.do); if (t === null || t === p.do) return;
    await agentAct(() => api("PATCH", agentPath("procedures", p.id), {do: t}), "procedure edited"); };
  del.onclick = async () => { if (!confirm("Delete this procedure for good? The agent loses it for every user.")) return;
    await agentAct(() => api("DELETE", agentPath("procedures", p.id)), "procedure deleted"); };
  if (p.status !== "expired") act.appendChild(edit);
  act.appendChild(del); box.appendChild(act);
  return box;
}
async function agentAct(call, done){ try { await call(); status(done); await loadProcedures(); } catch(e){ failed(e); } }

async function loadTools(){
  if (!$("user").value){ $("tools").replaceChildren(el("div", "meta", "pick a user")); return; }
  const q = new URLSearchParams({agent_id: $("agentId").value.trim(), top: "3"});
  const tools = (await (await api("GET", userPath("tool-stats") + "?" + q)).json()).tools;
  $("tools").replaceChildren(...(tools.length ? tools.map(toolBox) : [el("div", "meta", "no tool calls")]));
}

function toolBox(t){
  const box = el("div", "mem tool" + (t.failures ? " failing" : ""));
  box.dataset.tool = t.tool;
  box.appendChild(el("div", "text", t.tool));
  box.appendChild(el("div", "meta calls", t.calls + " calls, " + t.failures + " failed"
    + (t.p50_ms === null ? "" : " · p50 " + t.p50_ms + " ms, p95 " + t.p95_ms + " ms")));
  for (const e of t.errors) box.appendChild(el("div", "meta error", "✗ " + e.count + "× " + e.error));
  return box;
}

$("viewAgents").onclick = () => { showView("agents"); loadAgent().catch(failed); };
$("agentForm").onsubmit = (ev) => { ev.preventDefault(); loadAgent().catch(failed); };
$("showExpiredProcedures").onchange = () => loadProcedures().catch(failed);
$("user").addEventListener("change", () => { if (!$("agentsView").hidden) loadAgent().catch(failed); });
