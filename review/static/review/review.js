/* The review page's keys (no inline script: the CSP allows files of this site only).
   Outside a text box: a approve, c edit the first field, r write the reason, n next pending review.
   In a field: Ctrl+Enter corrects and approves; Enter approves when nothing was changed, else corrects.
   In the reason: Ctrl+Enter rejects. Escape leaves a text box. */
(function () {
  "use strict";
  function byId(id) { return document.getElementById(id); }
  function typing(target) {
    return target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.isContentEditable);
  }
  function changed() {
    return Array.prototype.some.call(document.querySelectorAll("input.field-input"), function (input) {
      return input.value !== input.getAttribute("data-extracted");
    });
  }
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.metaKey) { return; }
    if (typing(event.target)) {
      if (event.key === "Enter" && event.ctrlKey && event.target.id === "id_reason" && byId("reject")) {
        event.preventDefault();
        byId("reject").click();
      } else if (event.key === "Enter" && event.target.classList.contains("field-input")) {
        event.preventDefault();
        var button = (event.ctrlKey || changed()) ? byId("correct") : byId("approve");
        if (button) { button.click(); }
      } else if (event.key === "Escape") {
        event.target.blur();
      }
      return;
    }
    if (event.ctrlKey) { return; }
    var key = event.key.toLowerCase();
    if (key === "a" && byId("approve")) { event.preventDefault(); byId("approve").click(); }
    else if (key === "c") {
      var first = document.querySelector("input.field-input");
      if (first) { event.preventDefault(); first.focus(); first.select(); }
    }
    else if (key === "r" && byId("id_reason")) { event.preventDefault(); byId("id_reason").focus(); }
    else if (key === "n" && byId("next")) { event.preventDefault(); byId("next").click(); }
  });
})();
