// The page's words in English and Chinese. Each view registers its own; `t(key, vars)` picks the
// language the user chose (kept in local storage) or the browser's.
const dicts = { en: {}, zh: {} };
const STORE = "changji.lang";
let lang = localStorage.getItem(STORE) || ((navigator.language || "en").toLowerCase().startsWith("zh") ? "zh" : "en");
const listeners = new Set();

export const LANGS = ["en", "zh"];

export function register(words) {
  for (const code of LANGS) Object.assign(dicts[code], words[code] || {});
}

export function t(key, vars) {
  let text = dicts[lang][key] ?? dicts.en[key] ?? key;
  if (vars) for (const [name, value] of Object.entries(vars)) text = text.replaceAll(`{${name}}`, String(value));
  return text;
}

export function language() {
  return lang;
}

export function setLanguage(code) {
  lang = code;
  localStorage.setItem(STORE, code);
  document.documentElement.lang = code === "zh" ? "zh-CN" : "en";
  for (const listener of listeners) listener(code);
}

export function onLanguage(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
