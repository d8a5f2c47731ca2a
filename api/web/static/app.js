// The page's shell: sign in, the stories and cards, a story's views in tabs. Places are kept in the
// URL's fragment (#/stories/<id>/context), never the key.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { html } from "./html.js";
import { LANGS, language, onLanguage, register, setLanguage, t } from "./i18n.js";
import { ApiError, get, key } from "./api.js";
import { Notices } from "./ui.js";
import { Home } from "./home.js";
import { CardPage } from "./card.js";
import { StoryPage } from "./story.js";

register({
  en: {
    title: "changji",
    sign_in: "Sign in",
    sign_out: "Sign out",
    api_key: "API key",
    key_hint: "A key from `changji keys create`. It stays in this tab only.",
    key_refused: "This key is not accepted.",
    home: "Stories",
    language_name: "English",
  },
  zh: {
    title: "场记",
    sign_in: "登录",
    sign_out: "退出",
    api_key: "API 密钥",
    key_hint: "用 `changji keys create` 生成的密钥，只保存在本标签页中。",
    key_refused: "这个密钥不被接受。",
    home: "故事",
    language_name: "中文",
  },
});

function parse(hash) {
  const parts = hash.replace(/^#\/?/, "").split("/").filter(Boolean);
  if (parts[0] === "stories" && parts[1]) return { page: "story", id: parts[1], tab: parts[2] || "play" };
  if (parts[0] === "cards" && parts[1]) return { page: "card", id: parts[1] };
  return { page: "home" };
}

function SignIn({ onSignedIn }) {
  const [value, setValue] = useState("");
  const [error, setError] = useState(null);
  const submit = async (event) => {
    event.preventDefault();
    key.set(value.trim());
    try {
      await get("/stories", { limit: 1 });
      onSignedIn();
    } catch (failure) {
      key.clear();
      setError(failure instanceof ApiError && failure.status === 401 ? t("key_refused") : failure.message);
    }
  };
  return html`<form class="signin card-box" onSubmit=${submit}>
    <h1>${t("title")}</h1>
    <label for="key">${t("api_key")}</label>
    <input id="key" name="key" type="password" autocomplete="off" value=${value}
      onInput=${(e) => setValue(e.target.value)} required />
    <p class="muted">${t("key_hint")}</p>
    ${error ? html`<p class="problem" data-testid="problem">${error}</p>` : null}
    <button type="submit" class="primary">${t("sign_in")}</button>
  </form>`;
}

function App() {
  const [signedIn, setSignedIn] = useState(Boolean(key.get()));
  const [place, setPlace] = useState(parse(location.hash));
  const [, setLang] = useState(language());
  useEffect(() => onLanguage(setLang), []);
  useEffect(() => {
    const moved = () => setPlace(parse(location.hash));
    window.addEventListener("hashchange", moved);
    return () => window.removeEventListener("hashchange", moved);
  }, []);
  const signOut = () => {
    key.clear();
    setSignedIn(false);
  };
  let main;
  if (!signedIn) main = html`<${SignIn} onSignedIn=${() => setSignedIn(true)} />`;
  else if (place.page === "story") main = html`<${StoryPage} key=${place.id} id=${place.id} tab=${place.tab} />`;
  else if (place.page === "card") main = html`<${CardPage} key=${place.id} id=${place.id} />`;
  else main = html`<${Home} />`;
  return html`<header class="top">
      <a class="brand" href="#/">${t("title")}</a>
      ${signedIn ? html`<a href="#/">${t("home")}</a>` : null}
      <span class="grow"></span>
      <select aria-label="Language / 语言" value=${language()} onChange=${(e) => setLanguage(e.target.value)}>
        ${LANGS.map((code) => html`<option value=${code}>${code === "zh" ? "中文" : "English"}</option>`)}
      </select>
      ${signedIn ? html`<button class="link" onClick=${signOut}>${t("sign_out")}</button>` : null}
    </header>
    <main>${main}</main>
    <${Notices} />`;
}

render(html`<${App} />`, document.getElementById("app"));
