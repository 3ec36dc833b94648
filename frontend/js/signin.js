// The header's sign-in control (docs/auth.md): a person signs in with an OpenID Connect
// provider (a link to /api/v1/session/oidc/NAME/login) or a local account (name and password to
// POST /api/v1/session/password); or a project token is sent once to POST /api/v1/session. Each
// answers with the same HttpOnly cookie; the page never keeps a password or a token (no storage,
// no variable after the request). A person acts with their roles; a token's session only reads.
import { ApiError, getJSON } from "./api.js";
import { el } from "./util.js";
import { formatDateTime, hasMessage, t } from "./i18n.js";

const URL = "/api/v1/session";

const MARKER = "runcast_signed_in"; // set beside the HttpOnly session cookie; holds no secret

/** Whether this browser holds a session (the marker beside the HttpOnly cookie; it may have expired). */
export function hasSessionMarker() {
  return document.cookie.split(";").some((c) => c.trim().startsWith(MARKER + "="));
}

/** The signed-in session ({project, expires_at}) or null; a browser never signed in does not ask. */
export async function currentSession() {
  if (!hasSessionMarker()) return null;
  try {
    return await getJSON(URL);
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      document.cookie = `${MARKER}=; path=/; max-age=0; samesite=strict`; // the session ended: ask no more
      return null;
    }
    throw err;
  }
}

async function send(method, body, url = URL) {
  const options = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  return getJSON(url, options);
}

function errorText(err, what) {
  return err instanceof ApiError && err.status === 401 ? what : err.message;
}

function signedInView(host, session, onChange) {
  const out = el("button", { type: "button", id: "signout", text: t("signin.signOut") });
  out.addEventListener("click", async () => {
    out.disabled = true;
    try {
      await send("DELETE");
    } finally {
      onChange(null);
    }
  });
  const title = t("signin.ends", { when: formatDateTime(session.expires_at) });
  const role = (r) => t("signin.role", { role: hasMessage("signin.role." + r.role) ? t("signin.role." + r.role) : r.role, project: r.project });
  const who = session.user
    ? el("span", { className: "signed-in", id: "signin-state", title: [title, ...session.user.roles.map(role)].join("\n") },
      t("signin.signedInAs"), " ", el("strong", { id: "signin-name", text: session.user.display_name, "data-user": true }))
    : el("span", { className: "signed-in", id: "signin-state", title },
      t("signin.signedInTo"), " ", el("strong", { text: session.project, "data-user": true }));
  host.replaceChildren(who, out);
}

function passwordForm(onChange) {
  const name = el("input", { type: "text", id: "signin-name-input", name: "username", required: true,
    autocomplete: "username", spellcheck: "false" });
  const password = el("input", { type: "password", id: "signin-password", name: "password", required: true,
    autocomplete: "current-password", "aria-describedby": "signin-password-error" });
  const error = el("p", { id: "signin-password-error", className: "signin-error", role: "alert" });
  const form = el("form", { className: "signin-form", id: "signin-password-form" },
    el("label", {}, t("signin.name"), " ", name), el("label", {}, t("signin.password"), " ", password),
    el("button", { type: "submit", text: t("signin.signIn") }), error);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    const body = { name: name.value.trim(), password: password.value };
    password.value = "";
    try {
      onChange(await send("POST", body, URL + "/password"));
    } catch (err) {
      error.textContent = errorText(err, t("signin.wrongPassword"));
      password.focus();
    }
  });
  return form;
}

async function providerLinks() {
  try {
    const { providers } = await getJSON(URL + "/providers");
    const next = encodeURIComponent(location.pathname + location.search);
    return providers.map((p) => el("a", { className: "signin-provider", href: `${p.login_url}?next=${next}`,
      "data-provider": p.name, text: t("signin.withProvider", { provider: p.display_name }) }));
  } catch {
    return []; // a server without the route: tokens and passwords only
  }
}

function signedOutView(host, onChange, providers) {
  const input = el("input", { type: "password", id: "signin-token", name: "token", required: true,
    autocomplete: "off", spellcheck: "false", placeholder: t("signin.tokenPlaceholder"), "aria-describedby": "signin-error" });
  const error = el("p", { id: "signin-error", className: "signin-error", role: "alert" });
  const form = el("form", { className: "signin-form", id: "signin-form" },
    el("label", {}, t("signin.token"), " ", input),
    el("button", { type: "submit", text: t("signin.signIn") }),
    error);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    const token = input.value.trim();
    input.value = "";
    try {
      onChange(await send("POST", { token }));
    } catch (err) {
      error.textContent = errorText(err, t("signin.invalid"));
      input.focus();
    }
  });
  const panel = el("div", { className: "signin-panel" }, ...providers, passwordForm(onChange),
    el("p", { className: "signin-or", text: t("signin.orToken") }), form);
  const details = el("details", { className: "signin-box" }, el("summary", { text: t("signin.signIn") }), panel);
  details.addEventListener("toggle", () => details.open && details.querySelector("input").focus());
  host.replaceChildren(details);
}

/** Show the control in ``host``; resolves with the current session (or null). A change of
 * session reloads the page, so every read and the live stream start again under it. */
export async function mountSignIn(host, { onChange = () => location.reload() } = {}) {
  let session = null;
  try {
    session = await currentSession();
  } catch {
    session = null; // the control is offered; the page's own reads report the failure
  }
  if (session) signedInView(host, session, onChange);
  else signedOutView(host, onChange, await providerLinks());
  return session;
}
