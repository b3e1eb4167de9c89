/* mcpfusion tool docs: live search, theme switch and try-it requests. The page reads fine without it. */
(function () {
  "use strict";
  var root = document.documentElement;
  var THEME_KEY = "mcpfusion-docs-theme";

  /* -- theme: auto (follows the OS) -> light -> dark ----------------------------------------------- */
  var themes = ["auto", "light", "dark"];
  function storedTheme() {
    try { return localStorage.getItem(THEME_KEY) || "auto"; } catch (e) { return "auto"; }
  }
  function applyTheme(name) {
    if (name === "auto") { root.removeAttribute("data-theme"); } else { root.setAttribute("data-theme", name); }
    var button = document.querySelector(".theme-toggle");
    if (button) { button.textContent = "Theme: " + name; }
  }
  var toggle = document.querySelector(".theme-toggle");
  if (toggle) {
    toggle.hidden = false;
    toggle.addEventListener("click", function () {
      var next = themes[(themes.indexOf(storedTheme()) + 1) % themes.length];
      try { localStorage.setItem(THEME_KEY, next); } catch (e) { /* private mode: theme lasts the page */ }
      applyTheme(next);
    });
  }
  applyTheme(storedTheme());

  /* -- search: the same rule as mcpfusion/docs/search.py ------------------------------------------- */
  function words(query) { return query.toLowerCase().split(/\s+/).filter(Boolean); }
  function hit(keys, terms) { return terms.every(function (t) { return keys.indexOf(t) !== -1; }); }
  function filter(query) {
    var terms = words(query);
    var any = false;
    document.querySelectorAll("section.tool").forEach(function (section) {
      var toolKeys = section.getAttribute("data-keys");
      var whole = hit(toolKeys, terms);
      var shown = 0;
      section.querySelectorAll("article.action").forEach(function (article) {
        var ok = whole || hit(toolKeys + " " + article.getAttribute("data-keys"), terms);
        article.hidden = !ok;
        if (ok) { shown += 1; }
      });
      section.hidden = shown === 0;
      any = any || shown > 0;
    });
    document.querySelectorAll(".nav-tool").forEach(function (item) {
      var toolKeys = item.getAttribute("data-keys");
      var whole = hit(toolKeys, terms);
      var shown = 0;
      item.querySelectorAll(".nav-action").forEach(function (li) {
        var ok = whole || hit(toolKeys + " " + li.getAttribute("data-keys"), terms);
        li.hidden = !ok;
        if (ok) { shown += 1; }
      });
      item.hidden = shown === 0;
    });
    document.querySelectorAll(".no-results").forEach(function (p) { p.hidden = any; });
  }
  var box = document.getElementById("search");
  if (box) {
    box.addEventListener("input", function () { filter(box.value); });
    box.form.addEventListener("submit", function (event) { event.preventDefault(); filter(box.value); });
    var initial = new URLSearchParams(window.location.search).get("q");
    if (initial && !box.value) { box.value = initial; }
    if (box.value) { filter(box.value); }
  }

  /* -- try it: POST the JSON body to the REST endpoint ----------------------------------------------- */
  var apiBase = (document.body.getAttribute("data-api-base") || "").replace(/\/+$/, "");
  /* another origin (an export opened from disk has the origin "null"): the browser needs the server's CORS */
  var foreign = false;
  if (apiBase) {  /* a path (the server's root_path) is this origin */
    try { foreign = new URL(apiBase, window.location.href).origin !== window.location.origin; } catch (e) {
      foreign = true;
    }
  }
  /* cookies only reach the API from its own origin, and a page opened from a file has none to set */
  var cookiesWork = !foreign && /^https?:$/.test(window.location.protocol);
  document.querySelectorAll(".cors-note").forEach(function (note) { note.hidden = !foreign; });
  function unreachable(error) {
    if (!foreign) { return String(error) + "\n\nThe server did not answer: is it running?"; }
    return String(error) + "\n\nThis page (origin " + window.location.origin + ") calls " + apiBase +
      ", another origin: the browser blocks the answer unless that server allows this origin with CORS " +
      "(FastAPI's CORSMiddleware; a page opened from a file has the origin null). Or use the docs the server " +
      "serves itself (" + apiBase + "/tools), or the curl example above.";
  }
  /* the form's header fields (data-header) on top of the JSON and token headers; throws on a bad name/value */
  function requestHeaders(form, token) {
    var headers = new Headers({ "Content-Type": "application/json", "Accept": "application/json" });
    if (token) { headers.set("Authorization", "Bearer " + token); }
    form.querySelectorAll("input[data-header]").forEach(function (input) {
      var value = input.value.trim();
      if (!value) { return; }
      try { headers.set(input.getAttribute("data-header"), value); } catch (e) {
        throw new Error("Header " + input.getAttribute("data-header") + ": " + e.message);
      }
    });
    return headers;
  }
  /* the form's cookie fields (data-cookie) as [name, value]; fetch never sets a Cookie header */
  var COOKIE_NAME = /^[!#-'*+\-.0-9A-Z^-z|~]+$/;  /* an RFC 7230 token */
  var COOKIE_VALUE = /^[!#-+\--:<-[\]-~]+$/;  /* RFC 6265 cookie-octets, as the curl example checks */
  function requestCookies(form) {
    var cookies = [];
    form.querySelectorAll("input[data-cookie]").forEach(function (input) {
      var name = input.getAttribute("data-cookie");
      var value = input.value.trim();
      if (!value) { return; }
      if (!COOKIE_NAME.test(name) || !COOKIE_VALUE.test(value)) {
        throw new Error("Cookie " + name + ": a cookie's value (and name) is printable ASCII without " +
          "spaces, quotes, commas, semicolons or backslashes");
      }
      cookies.push([name, value]);
    });
    if (cookies.length && !cookiesWork) {
      throw new Error("The cookie fields work on the docs the API's own server serves (" +
        (apiBase || "the server") + "/tools): this page cannot set its cookies. Or use the curl example above.");
    }
    return cookies;
  }
  /* set for this request's path only, strict: sent with this call alone; cleared once it is answered */
  function setCookies(cookies, path, maxAge) {
    cookies.forEach(function (c) {
      document.cookie = c[0] + "=" + (maxAge === 0 ? "" : c[1]) + "; path=" + path + "; SameSite=Strict" +
        (maxAge === 0 ? "; max-age=0" : "") + (window.location.protocol === "https:" ? "; Secure" : "");
    });
  }
  function show(form, status, text, ok) {
    var out = form.querySelector(".response");
    out.hidden = false;
    out.classList.toggle("error", !ok);
    out.querySelector(".status").textContent = status;
    out.querySelector("code").textContent = text;
    var link = out.querySelector("a.download");
    if (link && link.href) { URL.revokeObjectURL(link.href); link.removeAttribute("href"); }
    if (link) { link.hidden = true; }
  }
  /* an answer read as text: JSON, XML, text/*; anything else (a PDF, an image) is a file to download */
  function textual(type) { return !type || /json|xml|^text\//.test(type); }
  /* the file name of a Content-Disposition (`filename="inv_1.pdf"`), else the path's last segment */
  function fileName(disposition, path) {
    var found = /filename="?([^";]+)"?/i.exec(disposition || "");
    return found ? found[1] : path.split("/").pop() || "answer";
  }
  function showFile(form, status, response, blob, path) {
    var type = (response.headers.get("Content-Type") || "").split(";")[0].trim();
    show(form, status, "binary " + (type || "data") + ", " + blob.size + " bytes", response.ok);
    var link = form.querySelector(".response a.download");
    var name = fileName(response.headers.get("Content-Disposition"), path);
    link.href = URL.createObjectURL(blob);
    link.download = name;
    link.textContent = "Download " + name;
    link.hidden = false;
  }
  document.querySelectorAll("form.tryit").forEach(function (form) {
    var button = form.querySelector("button[type=submit]");
    button.disabled = false;
    var tokenField = form.elements.namedItem("token");
    /* one token for the whole page: typing it in one form fills the others */
    tokenField.addEventListener("input", function () {
      document.querySelectorAll("form.tryit input[name=token]").forEach(function (other) {
        if (other !== tokenField) { other.value = tokenField.value; }
      });
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var raw = form.elements.namedItem("body").value.trim() || "{}";
      var body;
      try { body = JSON.parse(raw); } catch (e) { show(form, "Invalid JSON body", e.message, false); return; }
      var headers, cookies;
      try {
        headers = requestHeaders(form, tokenField.value.trim());
        headers.set("Accept", form.getAttribute("data-accept") || "application/json");
        cookies = requestCookies(form);
      } catch (e) {
        show(form, "Cannot send", e.message, false);
        return;
      }
      var url = apiBase + form.getAttribute("data-path");
      var cookiePath = cookies.length ? new URL(url, window.location.href).pathname : "";
      setCookies(cookies, cookiePath);
      button.disabled = true;
      show(form, "Sending…", "", true);
      fetch(url, {
        method: "POST", headers: headers, body: JSON.stringify(body),
        credentials: cookies.length ? "same-origin" : "omit"
      }).then(function (response) {
        var status = "HTTP " + response.status + " " + response.statusText;
        var type = (response.headers.get("Content-Type") || "").split(";")[0].trim().toLowerCase();
        if (!textual(type)) {
          return response.blob().then(function (blob) { showFile(form, status, response, blob, url); });
        }
        return response.text().then(function (text) {
          var pretty = text;
          try { pretty = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* not JSON: show as is */ }
          show(form, status, pretty, response.ok);
        });
      }).catch(function (e) {
        show(form, "Request failed", unreachable(e), false);
      }).finally(function () {
        setCookies(cookies, cookiePath, 0);
        button.disabled = false;
      });
    });
  });
})();
