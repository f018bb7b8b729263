// Small behaviours shared by every page (loaded after htmx and Bootstrap).
(function () {
  "use strict";
  // A confirmation dialog puts the cursor in its reason field (Bootstrap focuses the dialog itself).
  document.addEventListener("shown.bs.modal", function (event) {
    var field = event.target.querySelector("[data-confirm-focus]");
    if (field) { field.focus(); }
  });
  // No inline event handlers (the Content-Security-Policy forbids them): a select marked data-autosubmit submits its
  // form when changed (tenant and language switchers), a button marked data-print prints the page.
  document.addEventListener("change", function (event) {
    if (event.target.matches && event.target.matches("select[data-autosubmit]") && event.target.form) {
      event.target.form.submit();
    }
  });
  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("[data-print]")) { window.print(); }
  });
  // Polled regions (hx-trigger="every Ns") skip a beat rather than pull the page from under the user: while the tab
  // is hidden, while a dialog is open, and while the keyboard focus is inside the region (a swap would drop it).
  document.addEventListener("htmx:beforeRequest", function (event) {
    var region = event.detail.elt;
    var trigger = region && region.getAttribute && region.getAttribute("hx-trigger");
    if (!trigger || trigger.indexOf("every") === -1) { return; }
    var focused = document.activeElement;
    if (document.hidden || document.querySelector(".modal.show") || (focused && focused !== document.body && region.contains(focused))) {
      event.preventDefault();
    }
  });
})();
