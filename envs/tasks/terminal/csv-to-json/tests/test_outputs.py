import json

def test_json():
    with open("/app/employees.json") as f:
        data = json.load(f)
    assert data == [{'id': 101, 'name': 'Ana Silva', 'department': 'Engineering', 'salary': 98000}, {'id': 102, 'name': 'Ben Okafor', 'department': 'Sales', 'salary': 61000}, {'id': 103, 'name': 'Chen Wei', 'department': 'Engineering', 'salary': 105500}, {'id': 104, 'name': "Dara O'Neil", 'department': 'Support', 'salary': 52000}, {'id': 105, 'name': 'Eli Cohen', 'department': 'Sales', 'salary': 67250}, {'id': 106, 'name': 'Farah Haddad', 'department': 'Engineering', 'salary': 91000}]
    for row in data:
        assert isinstance(row["id"], int) and isinstance(row["salary"], int)
