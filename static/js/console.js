// Small behaviours shared by every page (loaded after htmx and Bootstrap).
(function () {
  "use strict";
  // A confirmation dialog puts the cursor in its reason field (Bootstrap focuses the dialog itself).
  document.addEventListener("shown.bs.modal", function (event) {
    var field = event.target.querySelector("[data-confirm-focus]");
    if (field) { field.focus(); }
  });
  // A polled region must not pull an open dialog or a focused control out from under the user: skip that poll.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var region = event.detail.elt;
    if (!region || !region.hasAttribute("hx-trigger") || region.getAttribute("hx-trigger").indexOf("every") === -1) { return; }
    if (region.querySelector(".modal.show") || region.contains(document.activeElement) && document.activeElement.matches("input, select, textarea")) {
      event.preventDefault();
    }
  });
})();
