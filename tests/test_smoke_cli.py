from tests.conftest import run_cli


def test_list_shows_sigmoid_with_its_difficulty():
    result = run_cli("list")
    assert result.exit_code == 0
    assert "sigmoid" in result.stdout
    assert "easy" in result.stdout
