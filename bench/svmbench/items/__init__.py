"""The benchmark's items: each module measures one item or a group of them."""
