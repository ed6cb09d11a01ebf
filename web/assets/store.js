// Shared by the two pages: what they keep across a reload.
//
// sessionStorage: a reload keeps the buyer signed in and their order on
// screen; closing the tab forgets the token. Private modes may refuse
// storage, so every access is guarded.
export const store = {
  get(key) {
    try {
      const raw = sessionStorage.getItem("seckill." + key);
      return raw ? JSON.parse(raw) : null;
    } catch (_) {
      return null;
    }
  },
  set(key, value) {
    try {
      if (value === null || value === undefined) sessionStorage.removeItem("seckill." + key);
      else sessionStorage.setItem("seckill." + key, JSON.stringify(value));
    } catch (_) {
      /* not kept: the page still works until a reload */
    }
  },
};
