// The operator console's only script. It never turns text into markup: what the server sends
// as panels was rendered (and escaped) by html/template, and everything this script writes
// itself goes through textContent.
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const conn = document.getElementById("conn");
  const liveMain = document.querySelector("[data-live-main]");
  const liveHeader = document.querySelector("[data-live-header]");
  const notice = document.getElementById("notice");
  const POLL_MS = 2000, STALE_MS = 12000, RETRY_STREAM_MS = 15000;
  let lastUpdate = Date.now(), lastWord = document.getElementById("word").dataset.word;
  let source = null, pollTimer = null, mode = "";

  // --- time -------------------------------------------------------------------------------
  function span(ms) {
    let s = Math.max(0, Math.round(ms / 1000));
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    if (h) return h + " h " + m + " min";
    if (m) return m + " min " + s + " s";
    return s + " s";
  }
  function tick() {
    const now = Date.now();
    document.querySelectorAll("[data-ago]").forEach(el => {
      el.textContent = span(now - Date.parse(el.dataset.ago)) + (el.closest(".since") ? "" : " ago");
    });
    document.querySelectorAll("[data-countdown]").forEach(el => {
      const left = Date.parse(el.dataset.countdown) - now;
      el.textContent = left > 0 ? "expires in " + span(left) : "expired";
      el.classList.toggle("urgent", left < 60000);
    });
    if (mode !== "disconnected" && now - lastUpdate > STALE_MS) disconnected();
  }

  // --- connection -------------------------------------------------------------------------
  function setMode(m, text) {
    mode = m;
    conn.textContent = text;
    conn.dataset.mode = m;
    document.body.classList.toggle("disconnected", m === "disconnected");
  }
  function apply(u) {
    lastUpdate = Date.now();
    lastWord = u.word;
    if (liveHeader) liveHeader.innerHTML = u.header; // rendered and escaped by html/template
    if (liveMain) {
      const focused = document.activeElement && document.activeElement.closest("[data-live-main]") ? keyOf(document.activeElement) : null;
      liveMain.innerHTML = u.main; // rendered and escaped by html/template
      if (focused) { const el = liveMain.querySelector(focused); if (el) el.focus(); }
    }
    document.title = u.word + document.title.replace(/^[A-Z]+/, "");
    tick();
  }
  // keyOf names the focused element so that the same one has the focus again after an
  // update: without it every update would send a keyboard user back to the top of the page.
  function keyOf(el) {
    const a = el.dataset.action;
    if (!a) {
      if (el.id) return "#" + CSS.escape(el.id);
      const href = el.getAttribute("href");
      return href ? 'a[href="' + CSS.escape(href) + '"]' : null;
    }
    let sel = '[data-action="' + a + '"]';
    for (const k of ["id", "server", "tool"]) if (el.dataset[k]) sel += "[data-" + k + '="' + CSS.escape(el.dataset[k]) + '"]';
    return sel;
  }
  function disconnected() {
    setMode("disconnected", "DISCONNECTED");
    const word = document.getElementById("word");
    const reason = document.getElementById("reason");
    if (word) { word.textContent = "DISCONNECTED"; word.className = "word word-disconnected"; word.dataset.word = "DISCONNECTED"; }
    if (reason) reason.textContent = "This page gets no updates from the gateway: the last state it saw was " + lastWord +
      " at " + new Date(lastUpdate).toLocaleTimeString() + ", and it may have changed since. Check the cell.";
  }
  function stream() {
    if (!window.EventSource) { poll(); return; }
    source = new EventSource("/console/events");
    source.addEventListener("state", e => { stopPolling(); setMode("live", "● LIVE"); apply(JSON.parse(e.data)); });
    source.addEventListener("ping", () => {
      lastUpdate = Date.now();
      if (mode === "live") return;
      // Back after a stall: the header still says DISCONNECTED, and the server sends the state
      // only when it changes, so fetch it now rather than keep showing the stale word.
      const was = mode;
      stopPolling(); setMode("live", "● LIVE");
      if (was === "disconnected") poll();
    });
    source.addEventListener("expired", () => { location.href = "/console/"; });
    source.onerror = () => {
      source.close(); source = null;
      if (!pollTimer) { poll(); pollTimer = setInterval(poll, POLL_MS); }
      setTimeout(() => { if (!source) stream(); }, RETRY_STREAM_MS);
    };
  }
  function stopPolling() { if (pollTimer) { clearInterval(pollTimer); pollTimer = null; } }
  async function poll() {
    try {
      const resp = await fetch("/console/state", {credentials: "same-origin", cache: "no-store"});
      if (resp.status === 401) { location.href = "/console/"; return; }
      if (!resp.ok) throw new Error("HTTP " + resp.status);
      apply(await resp.json());
      if (!source || source.readyState !== EventSource.OPEN) setMode("polling", "◐ refreshing every " + POLL_MS / 1000 + " s (live stream lost)");
    } catch (e) {
      disconnected();
    }
  }

  // --- actions ----------------------------------------------------------------------------
  function say(text, bad) {
    notice.hidden = false;
    notice.textContent = text;
    notice.classList.toggle("error", !!bad);
  }
  async function post(path, body) {
    const resp = await fetch(path, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify(body || {}),
    });
    let data = {};
    try { data = await resp.json(); } catch (e) { data = {error: "HTTP " + resp.status}; }
    if (!resp.ok) throw new Error(data.error || "HTTP " + resp.status);
    return data;
  }

  const dlg = document.getElementById("dlg");
  const dlgTitle = document.getElementById("dlg-title"), dlgBody = document.getElementById("dlg-body");
  const dlgReason = document.getElementById("dlg-reason"), dlgNeed = document.getElementById("dlg-reason-need");
  const dlgReasonLabel = document.getElementById("dlg-reason-label");
  const dlgError = document.getElementById("dlg-error"), dlgOK = document.getElementById("dlg-ok");
  let pending = null;

  function para(text, cls) {
    const p = document.createElement(cls === "pre" ? "pre" : "p");
    p.textContent = text;
    if (cls) p.className = cls;
    return p;
  }
  function ask(opts) {
    pending = opts;
    dlgTitle.textContent = opts.title;
    dlgBody.replaceChildren(...opts.body);
    const wantReason = opts.reason !== "none";
    dlgReason.hidden = dlgReasonLabel.hidden = !wantReason;
    dlgReason.value = "";
    dlgReason.required = opts.reason === "required";
    dlgNeed.textContent = opts.reason === "required" ? "(required)" : "(optional)";
    dlgError.textContent = "";
    dlgOK.textContent = opts.ok;
    dlg.showModal();
    (wantReason ? dlgReason : dlgOK).focus();
  }
  document.getElementById("dlg-cancel").addEventListener("click", () => dlg.close());
  document.getElementById("dlg-form").addEventListener("submit", async e => {
    e.preventDefault();
    const reason = dlgReason.value.trim();
    if (pending.reason === "required" && !reason) { dlgError.textContent = "A reason is required."; dlgReason.focus(); return; }
    dlgOK.disabled = true;
    try {
      const res = await post(pending.path, Object.assign({reason}, pending.body_extra || {}));
      dlg.close();
      say(res.message);
      poll();
    } catch (err) {
      dlgError.textContent = err.message;
    } finally {
      dlgOK.disabled = false;
    }
  });

  const haltDlg = document.getElementById("halt-dlg");
  const haltReason = document.getElementById("halt-reason"), haltError = document.getElementById("halt-error");
  const haltOK = document.getElementById("halt-ok");
  if (haltDlg) {
    document.getElementById("halt-cancel").addEventListener("click", () => haltDlg.close());
    document.getElementById("halt-form").addEventListener("submit", async e => {
      e.preventDefault();
      haltOK.disabled = true;
      haltOK.textContent = "HALTING…";
      try {
        const res = await post("/console/api/halt", {reason: haltReason.value.trim()});
        haltDlg.close();
        say(res.message);
        poll();
      } catch (err) {
        haltError.textContent = err.message;
      } finally {
        haltOK.disabled = false;
        haltOK.textContent = "■ HALT THE ROBOT NOW";
      }
    });
  }

  document.addEventListener("click", e => {
    const b = e.target.closest("button[data-action]");
    if (!b) return;
    const d = b.dataset;
    const enc = encodeURIComponent;
    switch (d.action) {
      case "halt":
        haltError.textContent = "";
        haltDlg.showModal();
        haltOK.focus();
        break;
      case "lock":
        ask({title: "Lock " + d.server + " now?", ok: "Lock " + d.server, reason: "required",
          body: [para("No physical call runs on " + d.server + " until someone unlocks it with a reason. A call already running goes on.")],
          path: "/console/api/lock/" + enc(d.server)});
        break;
      case "unlock":
        ask({title: "Unlock " + d.server + "?", ok: "Unlock " + d.server, reason: "required",
          body: [para("What put it in force:"), para(d.cause, "cause"),
            para("Unlock only after you have looked at the robot. Say what you inspected; it is kept in the audit log, and " + d.server + " is restarted.")],
          path: "/console/api/unlock/" + enc(d.server)});
        break;
      case "approve": {
        const args = document.getElementById("args-" + d.id);
        ask({title: "Approve " + d.tool + "?", ok: "Approve — run it once", reason: "optional",
          body: [para("This exact call runs once, with these arguments:"), para(args ? args.textContent : "", "pre")],
          path: "/console/api/approvals/" + enc(d.id) + "/approve"});
        break;
      }
      case "deny":
        ask({title: "Deny " + d.tool + "?", ok: "Deny", reason: "required",
          body: [para("The caller is told it was denied, and why.")],
          path: "/console/api/approvals/" + enc(d.id) + "/deny"});
        break;
      case "accept":
        ask({title: "Accept the new definition of " + d.server + "/" + d.tool + "?", ok: "Accept", reason: "none",
          body: [para("Models will read the new description and schema shown in the difference. Accept only what you have read.")],
          path: "/console/api/pins/" + enc(d.server) + "/accept", body_extra: {tool: d.tool, digest: d.digest}});
        break;
      case "reload":
        ask({title: "Reload the config file?", ok: "Reload", reason: "none",
          body: [para("A file with any problem is refused and the running config stays; the problems are shown here. Servers whose launch settings changed restart.")],
          path: "/console/api/reload"});
        break;
    }
  });

  setMode("connecting", "connecting…");
  setInterval(tick, 1000);
  tick();
  stream();
})();
