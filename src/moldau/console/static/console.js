// Refreshes elements marked data-refresh="URL" every data-every ms with the server's HTML.
// Charts are drawn on the server (inline SVG), so this is all the JavaScript there is.
document.querySelectorAll("[data-refresh]").forEach(function (box) {
  var every = parseInt(box.getAttribute("data-every") || "2000", 10);
  setInterval(function () {
    fetch(box.getAttribute("data-refresh"))
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html !== null) { box.innerHTML = html; } })
      .catch(function () { /* the next tick tries again */ });
  }, every);
});
