import json

def test_counts():
    with open("/app/status_counts.json") as f:
        data = json.load(f)
    assert data == {'304': 34, '500': 24, '200': 253, '404': 50, '302': 24, '401': 15}
    assert all(isinstance(v, int) for v in data.values())
