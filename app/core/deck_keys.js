// Talk mode's keys (app/core/deck_view.py): → and Page Down (what a clicker sends) press the
// deck's "next" button, ← and Page Up its "back" button. One listener for the browser tab,
// however often the script is sent again; keys typed into a control (a number box, a slider,
// a radio) and keys that reach the loop player's frame (it steps with the arrows) are theirs.
(function () {
  "use strict";
  if (window.faDeckKeys) return;
  window.faDeckKeys = true;
  const KEYS = {ArrowRight: "next", PageDown: "next", ArrowLeft: "back", PageUp: "back"};
  const OWN = 'input, textarea, select, [contenteditable="true"], [role="slider"], ' +
              '[role="radio"], [role="radiogroup"], [role="listbox"], [role="combobox"], ' +
              '[role="spinbutton"]';
  document.addEventListener("keydown", function (ev) {
    const dir = KEYS[ev.key];
    if (!dir || ev.defaultPrevented || ev.altKey || ev.ctrlKey || ev.metaKey || ev.shiftKey)
      return;
    const t = ev.target;
    if (t && t.closest && t.closest(OWN)) return;
    if (document.activeElement && document.activeElement.tagName === "IFRAME") return;
    const button = document.querySelector(".st-key-deck_" + dir + " button");
    if (!button || button.disabled) return;
    ev.preventDefault();
    button.click();
  });
})();
