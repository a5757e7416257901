// The knowledge graph tab: facts, episodes, supersessions and conflicts, drawn with Cytoscape.js.
(function () {
  const box = document.getElementById("graph");
  if (!box || typeof cytoscape === "undefined") return;
  fetch(box.dataset.src, { credentials: "same-origin" })
    .then((r) => r.json())
    .then((data) => {
      const cy = cytoscape({
        container: box,
        elements: [...data.nodes, ...data.edges],
        layout: { name: "cose", animate: false },
        style: [
          { selector: "node", style: { label: "data(label)", "font-size": 8, "text-wrap": "ellipsis", "text-max-width": 90, width: 14, height: 14 } },
          { selector: 'node[kind = "fact"]', style: { "background-color": "#2456c7" } },
          { selector: "node[?superseded]", style: { "background-color": "#9aa3b2" } },
          { selector: 'node[kind = "episode"]', style: { "background-color": "#d9822b", shape: "round-rectangle" } },
          { selector: "edge", style: { width: 1.5, "curve-style": "bezier", "target-arrow-shape": "triangle", "line-color": "#8895ab", "target-arrow-color": "#8895ab" } },
          { selector: 'edge[kind = "conflict"]', style: { "line-color": "#b42318", "target-arrow-color": "#b42318" } },
          { selector: 'edge[kind = "episode"]', style: { "line-style": "dotted", "target-arrow-shape": "none" } },
        ],
      });
      box.dataset.nodes = String(cy.nodes().length);
      cy.on("tap", "node", (event) => { const url = event.target.data("url"); if (url) window.location.href = url; });
    });
})();
