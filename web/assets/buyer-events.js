// The buyer page's hooks: what a feature asks for without importing the
// module that does it. A feature that changed the state calls `changed()`
// (the page is drawn again), one whose request found the sign-in expired
// calls `requestSignOut(message)`, and the sale's poll calls `saleFound()`
// when a sale it could not find appears. buyer.js wires them, once, to
// buyer-render.js's render, buyer-signin.js's signOut and
// buyer-holdings.js's restoreOrder: the features stay below those.

let onChanged = () => {};
let onSignedOut = () => {};
let onFound = () => {};

export function onChange(fn) {
  onChanged = fn;
}

export function onSignOut(fn) {
  onSignedOut = fn;
}

export function onSaleFound(fn) {
  onFound = fn;
}

// The state changed: draw the page again (now, before anything else runs).
export const changed = () => onChanged();

// The API refused the sign-in: sign out, saying `message`.
export const requestSignOut = (message) => onSignedOut(message);

// The sale shows up after its link was opened: the buyer's orders now.
export const saleFound = () => onFound();
