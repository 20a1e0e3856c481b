// odradek console: asks the JSON API (/api/...) on a timer and redraws the page's content.
// No framework and no build step; every value is escaped before it goes into the page.
"use strict";

const page = document.body.dataset.page;
const name = document.body.dataset.name;
const content = document.getElementById("content");
const statusBadge = document.getElementById("status");
const notice = document.getElementById("notice");
const PERIOD_MS = page === "group" ? 250 : 1000;

function esc(value) {
  return String(value ?? "-").replace(/[&<>"']/g, (c) => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
  })[c]);
}

function link(href, text) {
  return `<a href="${esc(href)}">${esc(text)}</a>`;
}

function table(id, columns, rows) {
  const head = columns.map((c) => `<th>${esc(c)}</th>`).join("");
  const body = rows.map((r) => `<tr>${r.map((cell) => `<td>${cell}</td>`).join("")}</tr>`);
  return `<table id="${id}"><thead><tr>${head}</tr></thead><tbody>${body.join("")}</tbody></table>`;
}

function stateBadge(state, id) {
  return `<span ${id ? `id="${id}" ` : ""}class="state state-${esc(state)}">${esc(state)}</span>`;
}

function facts(pairs) {
  return `<dl class="facts">${pairs.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${v}</dd>`).join("")}</dl>`;
}

const RENDER = {
  cluster(c) {
    return facts([
      ["cluster id", esc(c.cluster_id)],
      ["controller", esc(c.controller)],
      ["topics", esc(c.topics)],
      ["partitions", esc(c.partitions)],
      ["offline partitions", esc(c.offline_partitions)],
      ["under-replicated partitions", esc(c.under_replicated_partitions)],
    ]) + "<h2>brokers</h2>" + table("brokers", ["id", "address", "role"], c.brokers.map((b) => [
      esc(b.id), esc(`${b.host}:${b.port}`), b.controller ? "controller" : "",
    ])) + `<p>${link("/topics", "topics")} · ${link("/groups", "groups")}</p>`;
  },
  topics(topics) {
    return table("topics", ["topic", "partitions", "replication", "under-replicated"],
      topics.map((t) => [link(`/topics/${encodeURIComponent(t.name)}`, t.name) +
        (t.internal ? " <small>internal</small>" : ""), esc(t.partitions),
        esc(t.replication_factor), esc(t.under_replicated)]));
  },
  topic(t) {
    return table("partitions", ["partition", "leader", "replicas", "ISR", "earliest", "latest"],
      t.partitions.map((p) => [esc(p.partition), esc(p.leader), esc(p.replicas.join(", ")),
        esc(p.isr.join(", ")), esc(p.earliest), esc(p.latest)]));
  },
  groups(groups) {
    if (!groups.length) return "<p>No groups.</p>";
    return table("groups", ["group", "state", "generation", "members", "coordinator", "lag"],
      groups.map((g) => [link(`/groups/${encodeURIComponent(g.group)}`, g.group),
        stateBadge(g.state), esc(g.generation), esc(g.members), esc(g.coordinator),
        esc(g.lag)]));
  },
  group(g) {
    const timeline = `<h2>timeline</h2><ul id="timeline">${g.timeline.slice().reverse().map(
      (e) => `<li class="state-${esc(e.state)}">${esc(e.text)}</li>`).join("")}</ul>`;
    if (!g.exists) {
      return `<p>${stateBadge("none", "state")} The group does not exist (yet).</p>${timeline}`;
    }
    const c = g.coordinator;
    return facts([
      ["state", stateBadge(g.state, "state")],
      ["generation", `<span id="generation">${esc(g.generation)}</span>`],
      ["strategy", esc(g.strategy)],
      ["members", `<span id="member-count">${esc(g.members.length)}</span>`],
      ["coordinator", esc(`${c.host}:${c.port} (${c.id})`)],
      ["total lag", `<span id="lag">${esc(g.lag)}</span>`],
    ]) + "<h2>members</h2>" + table("members", ["member", "client id", "host", "partitions"],
      g.members.map((m) => [esc(m.member), esc(m.client_id), esc(m.host),
        esc(m.partitions.join(", ") || "-")]))
      + "<h2>lag per partition</h2>" + lagChart(g.partitions)
      + table("offsets", ["topic", "partition", "committed", "log end", "lag", "member"],
        g.partitions.map((p) => [link(`/topics/${encodeURIComponent(p.topic)}`, p.topic),
          esc(p.partition), esc(p.committed), esc(p.log_end), esc(p.lag), esc(p.owner)]))
      + timeline;
  },
};

function lagChart(partitions) {
  if (!partitions.length) return "<p>No partitions.</p>";
  const most = Math.max(1, ...partitions.map((p) => p.lag ?? 0));
  const row = 22, label = 150, width = 420;
  const bars = partitions.map((p, i) => {
    const lag = p.lag ?? 0;
    const w = Math.round((width * lag) / most);
    const y = i * row;
    return `<text x="0" y="${y + 15}">${esc(`${p.topic}-${p.partition}`)}</text>` +
      `<rect x="${label}" y="${y + 3}" width="${w}" height="${row - 6}"></rect>` +
      `<text x="${label + w + 6}" y="${y + 15}">${esc(p.lag)}</text>`;
  });
  return `<svg id="lag-chart" class="chart" width="${label + width + 60}" ` +
    `height="${partitions.length * row}" role="img" aria-label="lag per partition">` +
    `${bars.join("")}</svg>`;
}

function showStatus(connected, text) {
  statusBadge.textContent = connected ? "connected" : "disconnected";
  statusBadge.className = `status ${connected ? "connected" : "disconnected"}`;
  notice.hidden = connected;
  notice.textContent = connected ? "" : `${text} (showing the last answer; retrying)`;
}

async function refresh() {
  const path = name ? `/api/${page}s/${encodeURIComponent(name)}` : `/api/${page}`;
  try {
    const response = await fetch(path, { cache: "no-store" });
    const body = await response.json();
    if (response.status === 503) {
      showStatus(false, body.error);
    } else if (!response.ok) {
      showStatus(true);
      content.innerHTML = `<p class="error">${esc(body.error)}</p>`;
    } else {
      showStatus(true);
      content.innerHTML = RENDER[page](body);
    }
  } catch (error) {  // the console itself went away
    showStatus(false, String(error));
  }
  setTimeout(refresh, PERIOD_MS);
}

refresh();
