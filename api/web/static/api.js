// The /v1 API as the page calls it: the key from session storage in the Authorization header,
// problem+json errors turned into ApiError (title, detail, the fields at fault), and server-sent
// events read from a POST (EventSource cannot send a body or a header).
const KEY = "changji.key";

export const key = {
  get: () => sessionStorage.getItem(KEY),
  set: (value) => sessionStorage.setItem(KEY, value),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.title = problem.title || `HTTP ${status}`;
    this.detail = problem.detail || "";
    this.errors = problem.errors || [];
  }
}

function url(path, params) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params || {})) if (value !== undefined && value !== null) query.set(name, value);
  const text = query.toString();
  return "/v1" + path + (text ? "?" + text : "");
}

async function failure(response) {
  let problem = {};
  try {
    problem = await response.json();
  } catch {
    problem = { title: response.statusText };
  }
  if (problem.error && !problem.title) problem = { title: problem.error.type || "error", detail: problem.error.message };
  return new ApiError(response.status, problem);
}

export async function request(method, path, { params, body, file, ifMatch, headers = {}, signal } = {}) {
  const sent = { Authorization: `Bearer ${key.get()}`, ...headers };
  let payload;
  if (file) {
    payload = new FormData();
    payload.append("file", file, file.name);
  } else if (body !== undefined) {
    sent["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  if (ifMatch !== undefined && ifMatch !== null) sent["If-Match"] = ifMatch;
  const response = await fetch(url(path, params), { method, headers: sent, body: payload, signal });
  if (!response.ok) throw await failure(response);
  const data = response.status === 204 ? null : await response.json();
  return { data, etag: response.headers.get("ETag"), status: response.status };
}

export const get = async (path, params) => (await request("GET", path, { params })).data;
export const post = async (path, body, options = {}) => (await request("POST", path, { body, ...options })).data;
export const patch = async (path, body, options = {}) => (await request("PATCH", path, { body, ...options })).data;
export const put = async (path, body, options = {}) => (await request("PUT", path, { body, ...options })).data;
export const del = async (path, options = {}) => (await request("DELETE", path, options)).data;

// Every page of a listed collection (`items` or `nodes`, followed by `next_cursor`).
export async function all(path, params = {}, field = "items") {
  const found = [];
  let cursor;
  for (;;) {
    const page = await get(path, { ...params, cursor });
    found.push(...page[field]);
    if (!page.next_cursor) return { page, found };
    cursor = page.next_cursor;
  }
}

// POST with Accept: text/event-stream; `onEvent(name, data)` for each event as it arrives.
export async function stream(path, body, onEvent, { signal } = {}) {
  const response = await fetch(url(path), {
    method: "POST",
    headers: { Authorization: `Bearer ${key.get()}`, "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await failure(response);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
  }
}
