// Shared by the two pages: finding an element, and the status region.

export const $ = (id) => document.getElementById(id);

// Puts one message into a live region (role="status"): replacing its
// text is what a screen reader announces. `links` are [text, href] pairs
// appended as real links (text only: nothing from the API becomes HTML).
export function announce(region, message, tone, links) {
  region.dataset.tone = tone || "info";
  region.textContent = message;
  (links || []).forEach(([text, href]) => {
    region.append(" ");
    const a = document.createElement("a");
    a.textContent = text;
    a.href = href;
    region.append(a);
  });
}
