// Small pieces every view uses: errors shown as their problem's title and detail, data loaded
// with a hook, and the page's notices.
import { useCallback, useEffect, useState } from "preact/hooks";
import { html } from "./html.js";
import { register, t } from "./i18n.js";

register({
  en: { loading: "Loading…", retry: "Try again", close: "Close", field: "field" },
  zh: { loading: "加载中…", retry: "重试", close: "关闭", field: "字段" },
});

const noticeListeners = new Set();
let notices = [];
let noticeId = 0;

export function notify(error) {
  const entry =
    error && error.title
      ? { id: ++noticeId, title: error.title, detail: error.detail, errors: error.errors || [] }
      : { id: ++noticeId, title: String(error && error.message ? error.message : error), detail: "", errors: [] };
  notices = [...notices, entry].slice(-4);
  for (const listener of noticeListeners) listener(notices);
  if (!(error && error.title)) console.warn(error);
}

function dismiss(id) {
  notices = notices.filter((n) => n.id !== id);
  for (const listener of noticeListeners) listener(notices);
}

export function Notices() {
  const [shown, setShown] = useState(notices);
  useEffect(() => {
    noticeListeners.add(setShown);
    return () => noticeListeners.delete(setShown);
  }, []);
  return html`<div class="notices" role="status" aria-live="polite">
    ${shown.map(
      (n) => html`<div class="notice" key=${n.id} data-testid="problem">
        <strong>${n.title}</strong>${n.detail ? html`: <span>${n.detail}</span>` : null}
        ${n.errors.length
          ? html`<ul>${n.errors.map((e) => html`<li><code>${e.field}</code> ${e.message}</li>`)}</ul>`
          : null}
        <button class="link" onClick=${() => dismiss(n.id)} aria-label=${t("close")}>×</button>
      </div>`,
    )}
  </div>`;
}

// Loads `load()` when `deps` change: [data, error, reload, set]. A failure is kept and shown by the view, beside
// what was shown before it (a reload never blanks the view); `set(data)` shows an answer that carries the data.
export function useLoad(load, deps) {
  const [state, setState] = useState({ data: null, error: null });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    load().then(
      (data) => live && setState({ data, error: null }),
      (error) => live && setState((old) => ({ data: old.data, error })),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((n) => n + 1), []);
  const set = useCallback((data) => setState({ data, error: null }), []);
  return [state.data, state.error, reload, set];
}

export function Problem({ error, onRetry }) {
  if (!error) return null;
  return html`<div class="problem" role="alert" data-testid="problem">
    <strong>${error.title || error.message}</strong>${error.detail ? html`: ${error.detail}` : null}
    ${onRetry ? html` <button onClick=${onRetry}>${t("retry")}</button>` : null}
  </div>`;
}

export function Loading() {
  return html`<p class="muted">${t("loading")}</p>`;
}

// Runs an action, shows its failure, and returns its result (undefined when it failed).
export async function attempt(action) {
  try {
    return await action();
  } catch (error) {
    notify(error);
    return undefined;
  }
}

export function short(id) {
  return id ? String(id).slice(0, 8) : "";
}
