// The console's hooks: what a feature asks for without importing the
// module that does it. The list of sales (ops-sales.js) asks to watch a
// sale with `watchSale(id)`; the live view (ops-live.js), whose poll may
// find the sign-in expired, asks to sign out with `requestSignOut(message)`.
// ops.js wires them, once, to ops-live.js's watch and ops-signin.js's
// signOut: the features stay below those.

let onWatched = () => {};
let onSignedOut = () => {};

export function onWatch(fn) {
  onWatched = fn;
}

export function onSignOut(fn) {
  onSignedOut = fn;
}

// Watch sale `id` from now on.
export const watchSale = (id) => onWatched(id);

// The API refused the sign-in: sign out, saying `message`.
export const requestSignOut = (message) => onSignedOut(message);
