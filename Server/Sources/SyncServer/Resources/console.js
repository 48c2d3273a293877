// The console of sync-server (docs/console.md): reads /console/api/… and draws the page. No framework, no
// build step. The token, when the server checks tokens, stays in this tab (sessionStorage) and is sent as
// Authorization: Bearer — never in a URL.
"use strict";

const tokenKey = "sync-console-token";
const pageSize = 50;
const systemColumns = ["id", "createdAt", "updatedAt", "version", "deleted"];

const $ = (id) => document.getElementById(id);

function show(element, visible) {
  element.hidden = !visible;
}

function say(text) {
  $("message").textContent = text || "";
  show($("message"), Boolean(text));
}

/// A GET of the console's API: the JSON body, or an Error whose message is the server's own words.
async function api(path) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(tokenKey);
  if (token) headers.Authorization = "Bearer " + token;
  const response = await fetch(path, { headers, cache: "no-store" });
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  if (!response.ok) {
    const error = new Error((body && body.error) || "The server answered " + response.status);
    error.status = response.status;
    throw error;
  }
  return body;
}

/// Handles what any page's request may meet: sign-in needed, not an administrator, the server gone.
function handle(error) {
  if (error.status === 401) {
    show($("signin"), true);
    say(error.message + " — sign in with an administrator's token.");
  } else if (error.status === 403) {
    show($("signin"), true);
    say(error.message + " — this token is not an administrator's.");
  } else if (error.status === undefined) {
    say("The server cannot be reached: " + error.message);
  } else {
    say(error.message);
  }
}

function cell(tag, text, className) {
  const element = document.createElement(tag);
  element.textContent = text;
  if (className) element.className = className;
  return element;
}

function shown(value) {
  if (value === undefined) return "";
  if (value === null) return "null";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

// MARK: The overview

async function overview() {
  show($("overview"), true);
  const body = await api("/console/api/overview");
  $("health").textContent = body.status === "ok" ? "● healthy" : "● " + body.status;
  $("health").className = "health " + (body.status === "ok" ? "ok" : "bad");
  const stats = $("stats");
  stats.replaceChildren();
  for (const [label, value] of [
    ["Database", body.database],
    ["Up since", new Date(body.startedAt).toLocaleString()],
    ["Requests", body.requests],
    ["Conflicts", body.conflicts],
    ["Rows returned", body.rowsReturned],
  ]) {
    const group = document.createElement("div");
    group.append(cell("dt", label), cell("dd", String(value)));
    stats.append(group);
  }
  const rows = $("tables");
  rows.replaceChildren();
  for (const table of body.tables) {
    const row = document.createElement("tr");
    row.dataset.table = table.name;
    const name = document.createElement("td");
    const link = cell("a", table.name);
    link.href = "/console/tables/" + encodeURIComponent(table.name);
    name.append(link);
    const kind = [table.perUser ? "per-user" : "shared", table.softDelete ? "soft delete" : "hard delete"];
    row.append(
      name,
      cell("td", String(table.live), "number live"),
      cell("td", String(table.deleted), "number deleted"),
      cell("td", kind.join(", ")),
    );
    rows.append(row);
  }
  say("");
}

// MARK: A table's rows

const state = { name: "", filter: "", deleted: false, orderBy: "", skip: 0, columns: [], loads: 0 };

/// The page's own URL holds the query, so that a view can be linked (no secret is in it).
function readLocation() {
  const parameters = new URLSearchParams(location.search);
  state.filter = parameters.get("filter") || "";
  state.deleted = parameters.get("deleted") === "1";
  state.orderBy = parameters.get("orderby") || "";
  state.skip = Math.max(0, parseInt(parameters.get("skip") || "0", 10) || 0);
}

function writeLocation() {
  const parameters = new URLSearchParams();
  if (state.filter) parameters.set("filter", state.filter);
  if (state.deleted) parameters.set("deleted", "1");
  if (state.orderBy) parameters.set("orderby", state.orderBy);
  if (state.skip) parameters.set("skip", String(state.skip));
  const query = parameters.toString();
  history.replaceState(null, "", location.pathname + (query ? "?" + query : ""));
}

function apiQuery() {
  const parameters = [];
  const add = (name, value) => parameters.push(name + "=" + encodeURIComponent(value));
  if (state.filter) add("$filter", state.filter);
  if (state.orderBy) add("$orderby", state.orderBy);
  add("$skip", String(state.skip));
  add("$top", String(pageSize));
  if (state.deleted) add("__includeDeleted", "true");
  return parameters.join("&");
}

async function tablePage(name) {
  state.name = name;
  readLocation();
  show($("table"), true);
  $("table-name").textContent = name;
  document.title = name + " — sync-server console";
  $("filter").value = state.filter;
  $("deleted").checked = state.deleted;
  $("query").addEventListener("submit", (event) => {
    event.preventDefault();
    state.filter = $("filter").value.trim();
    state.skip = 0;
    loadRows().catch(handle);
  });
  $("deleted").addEventListener("change", () => {
    state.deleted = $("deleted").checked;
    state.skip = 0;
    loadRows().catch(handle);
  });
  $("previous").addEventListener("click", () => {
    state.skip = Math.max(0, state.skip - pageSize);
    loadRows().catch(handle);
  });
  $("next").addEventListener("click", () => {
    state.skip += pageSize;
    loadRows().catch(handle);
  });
  await loadRows();
}

async function loadRows() {
  writeLocation();
  // Only the latest request draws: an older answer arriving late must not replace a newer view.
  const load = ++state.loads;
  let body;
  try {
    body = await api("/console/api/tables/" + encodeURIComponent(state.name) + "?" + apiQuery());
  } catch (error) {
    if (load !== state.loads) return;
    if (error.status === 400) {
      // A query the API refuses, in the API's words.
      $("error").textContent = error.message;
      show($("error"), true);
      $("rows").replaceChildren();
      $("summary").textContent = "";
      return;
    }
    throw error;
  }
  if (load !== state.loads) return;
  show($("error"), false);
  say("");
  const user = body.columns.filter((column) => !systemColumns.includes(column));
  state.columns = ["id", ...user, "updatedAt", "version", "deleted", "createdAt"].filter((column) =>
    body.columns.includes(column),
  );
  drawColumns();
  drawRows(body.items);
  const first = body.items.length ? state.skip + 1 : 0;
  $("summary").textContent =
    body.count + (body.count === 1 ? " row" : " rows") + (state.deleted ? " (deleted ones too)" : "") +
    (body.items.length ? "; showing " + first + "–" + (state.skip + body.items.length) : "");
  $("previous").disabled = state.skip === 0;
  $("next").disabled = state.skip + body.items.length >= body.count;
}

function drawColumns() {
  const header = $("columns");
  header.replaceChildren();
  const [current, direction] = (state.orderBy || "updatedAt desc").split(" ");
  for (const column of state.columns) {
    const th = cell("th", column);
    th.dataset.column = column;
    th.title = "Sort by " + column;
    if (column === current) {
      th.classList.add("sorted");
      th.textContent = column + (direction === "desc" ? " ▼" : " ▲");
    }
    th.addEventListener("click", () => {
      const descending = column === current && direction !== "desc";
      state.orderBy = column + (descending ? " desc" : " asc");
      state.skip = 0;
      loadRows().catch(handle);
    });
    header.append(th);
  }
}

function drawRows(items) {
  const body = $("rows");
  body.replaceChildren();
  for (const item of items) {
    const row = document.createElement("tr");
    row.className = "row" + (item.deleted ? " deleted" : "");
    row.dataset.id = item.id;
    for (const column of state.columns) {
      const text = shown(item[column]);
      const td = cell("td", text.length > 80 ? text.slice(0, 79) + "…" : text);
      td.dataset.column = column;
      row.append(td);
    }
    const details = document.createElement("tr");
    details.className = "json";
    details.hidden = true;
    const td = document.createElement("td");
    td.colSpan = state.columns.length;
    td.append(cell("pre", JSON.stringify(item, null, 2)));
    details.append(td);
    row.title = "Show the row's JSON";
    row.addEventListener("click", () => {
      details.hidden = !details.hidden;
      row.classList.toggle("open", !details.hidden);
    });
    body.append(row, details);
  }
}

// MARK: Start

async function start() {
  $("signin").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(tokenKey, $("token").value.trim());
    $("token").value = "";
    location.reload();
  });
  $("signout").addEventListener("click", () => {
    sessionStorage.removeItem(tokenKey);
    location.reload();
  });
  show($("signout"), Boolean(sessionStorage.getItem(tokenKey)));
  const path = location.pathname.replace(/\/+$/, "");
  try {
    if (path.startsWith("/console/tables/")) {
      await tablePage(decodeURIComponent(path.slice("/console/tables/".length)));
      await health();
    } else {
      await overview();
    }
  } catch (error) {
    handle(error);
  }
}

/// The health mark on a table's page (the overview sets it from its own answer).
async function health() {
  try {
    const body = await api("/health");
    $("health").textContent = body.status === "ok" ? "● healthy" : "● " + body.status;
    $("health").className = "health " + (body.status === "ok" ? "ok" : "bad");
  } catch (error) {
    $("health").textContent = "● unreachable";
    $("health").className = "health bad";
  }
}

start();
