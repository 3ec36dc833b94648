// The header's sign-in control (docs/auth.md): a project token is sent once to
// POST /api/v1/session, which answers with an HttpOnly cookie; the page never keeps the token
// (no storage, no variable after the request). The cookie makes this browser's reads (pages,
// stream, downloads) those of the project's team; writes still need the token itself.
import { ApiError, getJSON } from "./api.js";
import { el } from "./util.js";
import { formatDateTime, t } from "./i18n.js";

const URL = "/api/v1/session";

const MARKER = "runcast_signed_in"; // set beside the HttpOnly session cookie; holds no secret

/** The signed-in session ({project, expires_at}) or null; a browser never signed in does not ask. */
export async function currentSession() {
  if (!document.cookie.split(";").some((c) => c.trim().startsWith(MARKER + "="))) return null;
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

async function send(method, body) {
  const options = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  return getJSON(URL, options);
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
  host.replaceChildren(
    el("span", { className: "signed-in", id: "signin-state", title: t("signin.ends", { when: formatDateTime(session.expires_at) }) },
      t("signin.signedInTo"), " ", el("strong", { text: session.project, "data-user": true })),
    out,
  );
}

function signedOutView(host, onChange) {
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
      error.textContent = err instanceof ApiError && err.status === 401 ? t("signin.invalid") : err.message;
      input.focus();
    }
  });
  const details = el("details", { className: "signin-box" }, el("summary", { text: t("signin.signIn") }), form);
  details.addEventListener("toggle", () => details.open && input.focus());
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
  else signedOutView(host, onChange);
  return session;
}
